#include "engine/kernels/testing/host_cuda.h"

#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/kernels/testing/host_cuda_memory.h"
#include "engine/kernels/testing/host_cuda_run.h"

namespace host_cuda {
namespace detail {

Builtins builtins;

namespace {

constexpr unsigned char kPoisonByte = 0xFF;
constexpr uint64_t kMaxBlocks = uint64_t{1} << 24;     // the harness's own limit
constexpr size_t kMaxDynamicSharedBytes = 227 * 1024;  // a block's maximum on sm_90 (opt-in)
constexpr size_t kMinStackBytes = size_t{16} << 10;

// Fibers are kept between launches (stacks are mapped once).
struct FiberPool {
  size_t stack_bytes = 0;
  std::vector<std::unique_ptr<Fiber>> fibers;
};

uint3 Unflatten(uint64_t i, dim3 d) {
  return uint3{static_cast<unsigned>(i % d.x), static_cast<unsigned>(i / d.x % d.y),
               static_cast<unsigned>(i / d.x / d.y)};
}

// In order, reversed, or a fresh seeded shuffle.
void Arrange(Schedule schedule, std::mt19937_64* rng, std::vector<uint64_t>* order) {
  const uint64_t n = order->size();
  for (uint64_t i = 0; i < n; ++i) (*order)[i] = schedule == Schedule::kReversed ? n - 1 - i : i;
  if (schedule != Schedule::kShuffled) return;
  for (uint64_t i = n; i > 1; --i) std::swap((*order)[i - 1], (*order)[(*rng)() % i]);
}

std::string CheckConfiguration(const LaunchOptions& o, dim3 grid, dim3 block, size_t smem) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
      threads > 1024) {
    return "invalid configuration: block " + Coords(block) +
           " (each dimension >= 1, x and y <= 1024, z <= 64, at most 1024 threads)";
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    return "invalid configuration: grid " + Coords(grid) + " (each dimension >= 1, x < 2^31, y and z <= 65535)";
  }
  if (uint64_t{grid.x} * grid.y * grid.z > kMaxBlocks) {
    return "grid " + Coords(grid) + " has more than 2^24 blocks: too many to run on the host";
  }
  if (smem > kMaxDynamicSharedBytes) {
    return "invalid configuration: " + std::to_string(smem) + " bytes of dynamic shared memory (at most " +
           std::to_string(kMaxDynamicSharedBytes) + ")";
  }
  if (o.stack_bytes < kMinStackBytes) return "LaunchOptions::stack_bytes below 16 KiB";
  return "";
}

std::mutex g_launch_mutex;  // launches run one at a time (the built-ins are globals)
LaunchRun* g_run = nullptr;

FiberPool& Pool() {
  static FiberPool* pool = new FiberPool;
  return *pool;
}

LaunchRun& Current() {
  if (g_run == nullptr || !g_run->in_fiber()) {
    std::fprintf(stderr, "host_cuda: a CUDA built-in was called outside a kernel run by host_cuda::Launch\n");
    std::abort();
  }
  return *g_run;
}

}  // namespace

void LaunchRun::FiberMain() {
  LaunchRun& run = *g_run;
  run.invoke_(run.closure_);
  run.current_->wait = Wait::kExited;
  --run.live_;
  SwitchContext(&run.abandoned_, &run.scheduler_);
  std::abort();  // unreachable
}

void LaunchRun::PrepareFibers() {
  FiberPool& pool = Pool();
  const size_t stack_bytes = (options_.stack_bytes + PageBytes() - 1) / PageBytes() * PageBytes();
  if (pool.stack_bytes != stack_bytes) {
    pool.fibers.clear();
    pool.stack_bytes = stack_bytes;
  }
  while (pool.fibers.size() < threads_) {
    auto f = std::make_unique<Fiber>();
    f->stack = GuardedMapping(stack_bytes + PageBytes(), GuardedMapping::Guard::kFirstPage);
    pool.fibers.push_back(std::move(f));
  }
  fibers_.clear();
  for (unsigned i = 0; i < threads_; ++i) {
    Fiber* f = pool.fibers[i].get();
    f->linear = i;
    f->tid = Unflatten(i, block_);
    fibers_.push_back(f);
  }
  warp_ops_.assign((threads_ + kWarpLanes - 1) / kWarpLanes, {});
  order_.resize(threads_);
}

LaunchResult LaunchRun::Execute(AnchorFn anchor) {
  if (!FindThreadLocalBlock(anchor(), &tls_begin_, &tls_bytes_)) {
    return {false, "host_cuda: cannot find the kernels' thread-local block (static __shared__ memory)"};
  }
  worker_ = pthread_self();
  PrepareFibers();
  builtins.block_dim = block_;
  builtins.grid_dim = grid_;
  const uint64_t blocks = uint64_t{grid_.x} * grid_.y * grid_.z;
  std::vector<uint64_t> block_order(blocks);
  std::mt19937_64 block_rng(options_.seed);
  Arrange(options_.schedule, &block_rng, &block_order);
  FaultHandlers handlers([](int signal, const void* address, const void* stack_pointer) {
    if (g_run != nullptr) g_run->Fault(signal, address, stack_pointer);
  });
  for (uint64_t b : block_order) {
    if (!RunBlock(b)) return {false, error_};
  }
  return {};
}

bool LaunchRun::RunBlock(uint64_t block_linear) {
  block_idx_ = Unflatten(block_linear, grid_);
  builtins.block_idx = block_idx_;
  std::memset(tls_begin_, kPoisonByte, tls_bytes_);
  std::memset(dynamic_base_, kPoisonByte, dynamic_bytes_);
  for (Fiber* f : fibers_) {
    MakeContext(&f->context, f->stack.usable(), f->stack.usable_bytes(), &LaunchRun::FiberMain);
    f->wait = Wait::kRunnable;
  }
  for (auto& ops : warp_ops_) ops.clear();
  live_ = threads_;
  rng_.seed(options_.seed * 0x9e3779b97f4a7c15ull + block_linear);
  Arrange(options_.schedule, &rng_, &order_);
  while (true) {
    for (uint64_t i : order_) {
      Fiber* f = fibers_[i];
      if (f->wait != Wait::kRunnable) continue;
      Resume(f);
      if (!error_.empty()) return false;
    }
    if (options_.schedule == Schedule::kShuffled) Arrange(options_.schedule, &rng_, &order_);
    if (CompleteWarpOps()) continue;
    if (live_ == 0) return true;
    if (ReleaseBarrier()) continue;
    error_ = Diagnose();
    return false;
  }
}

void LaunchRun::Resume(Fiber* f) {
  current_ = f;
  builtins.thread_idx = f->tid;
  in_fiber_ = true;
  SwitchContext(&scheduler_, &f->context);
  in_fiber_ = false;
  current_ = nullptr;
  if (fault_[0] != '\0' && error_.empty()) error_ = fault_;
}

void LaunchRun::Abandon() {
  current_->wait = Wait::kExited;
  SwitchContext(&abandoned_, &scheduler_);
  std::abort();  // unreachable
}

void LaunchRun::Trap(Site site) {
  error_ = Where(*current_) + ": __trap() at " + At(site);
  Abandon();
}

void LaunchRun::Fault(int signal, const void* address, const void* stack_pointer) {
  if (!in_fiber_ || current_ == nullptr || !pthread_equal(pthread_self(), worker_)) return;
  const Fiber& f = *current_;
  char what[200];
  // A frame larger than the guard page puts the stack pointer below the stack
  // without touching the guard.
  const auto* sp = static_cast<const unsigned char*>(stack_pointer);
  const bool sp_below = sp != nullptr && sp < f.stack.usable() && sp + (size_t{64} << 20) > f.stack.usable();
  if (f.stack.InGuard(address) || sp_below) {
    std::snprintf(what, sizeof what, "overflowed its %zu-byte stack (raise LaunchOptions::stack_bytes)",
                  f.stack.usable_bytes());
  } else if (dynamic_.InGuard(address)) {
    std::snprintf(what, sizeof what, "accessed past the end of the %zu bytes of dynamic shared memory", dynamic_bytes_);
  } else if (signal == SIGFPE) {
    std::snprintf(what, sizeof what, "arithmetic exception (SIGFPE: an integer division by zero?)");
  } else if (signal == SIGILL) {
    std::snprintf(what, sizeof what, "illegal instruction (SIGILL: __builtin_trap or undefined behaviour)");
  } else if (signal == SIGABRT) {
    std::snprintf(what, sizeof what, "aborted (SIGABRT: a failed assert?)");
  } else {
    std::snprintf(what, sizeof what, "invalid memory access at %p (%s)", address,
                  signal == SIGBUS ? "SIGBUS" : "SIGSEGV");
  }
  std::snprintf(fault_, sizeof fault_, "block (%u,%u,%u) thread (%u,%u,%u): %s", block_idx_.x, block_idx_.y,
                block_idx_.z, f.tid.x, f.tid.y, f.tid.z, what);
  in_fiber_ = false;
  // Leave the handler for good: unblock the signal (no sigreturn will), and
  // return into Resume, which reports fault_.
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signal);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  SwitchContext(&abandoned_, &scheduler_);
}

int SyncThreads(BarrierKind kind, int predicate, const char* file, int line) {
  return Current().SyncThreads(kind, predicate, Site{file, line});
}

uint64_t WarpOp(WarpOpKind kind, unsigned mask, uint64_t payload, int64_t param, int width, const char* file,
                int line) {
  return Current().WarpOp(kind, mask, payload, param, width, Site{file, line});
}

void Trap(const char* file, int line) { Current().Trap(Site{file, line}); }

unsigned char* DynamicSharedBase() { return Current().dynamic_base(); }

LaunchResult Run(const LaunchOptions& options, dim3 grid, dim3 block, size_t dynamic_smem_bytes, InvokeFn invoke,
                 void* closure, AnchorFn anchor) {
  const std::string invalid = CheckConfiguration(options, grid, block, dynamic_smem_bytes);
  if (!invalid.empty()) return {false, invalid};
  std::lock_guard<std::mutex> lock(g_launch_mutex);
  LaunchRun run(options, grid, block, dynamic_smem_bytes, invoke, closure);
  g_run = &run;
  LaunchResult result;
  // A fresh thread: its thread-local block holds nothing but what the
  // kernels use, so poisoning it spares the caller's own thread-locals.
  std::thread worker([&] { result = run.Execute(anchor); });
  worker.join();
  g_run = nullptr;
  return result;
}

}  // namespace detail

std::vector<LaunchOptions> TestSchedules() {
  LaunchOptions in_order, reversed, shuffled;
  reversed.schedule = Schedule::kReversed;
  shuffled.schedule = Schedule::kShuffled;
  shuffled.seed = 1;
  return {in_order, reversed, shuffled};
}

std::string ToString(const LaunchOptions& options) {
  switch (options.schedule) {
    case Schedule::kInOrder: return "in order";
    case Schedule::kReversed: return "reversed";
    case Schedule::kShuffled: return "shuffled (seed " + std::to_string(options.seed) + ")";
  }
  return "?";
}

}  // namespace host_cuda
