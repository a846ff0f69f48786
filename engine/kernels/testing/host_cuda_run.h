// The launch machinery of host_cuda, internal to the harness (host_cuda.cc
// runs blocks and fibers, host_cuda_sync.cc the barriers and warp
// operations). Not thread-safe: one launch at a time, on its worker thread.
#ifndef RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_RUN_H_
#define RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_RUN_H_

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/testing/host_cuda.h"
#include "engine/kernels/testing/host_cuda_context.h"
#include "engine/kernels/testing/host_cuda_memory.h"

namespace host_cuda::detail {

constexpr unsigned kWarpLanes = 32;

struct Site {
  const char* file;
  int line;
};

enum class Wait : uint8_t { kRunnable, kBarrier, kWarpOp, kExited };

// One CUDA thread: its context and stack, and what it waits for.
struct Fiber {
  Context context;
  GuardedMapping stack;  // guard page below the stack
  uint3 tid;
  unsigned linear = 0;
  Wait wait = Wait::kRunnable;
  Site site{"", 0};
  BarrierKind barrier = BarrierKind::kSync;
  WarpOpKind op = WarpOpKind::kSyncWarp;
  unsigned mask = 0;
  int predicate = 0;     // barriers
  uint64_t payload = 0;  // warp operations: value or predicate
  int64_t param = 0;     // shuffles: source lane, delta or lane mask
  uint64_t result = 0;
};

// An unfinished warp operation: the lanes of `expected` (the mask's existing
// lanes) must all arrive.
struct PendingOp {
  WarpOpKind kind;
  unsigned mask;
  int width;
  unsigned expected;
  unsigned arrived;
  Site site;
};

std::string Coords(const uint3& v);
std::string At(Site s);  // "file:line"
bool SameSite(Site a, Site b);

// One launch, run on a worker thread. The CUDA threads (fibers) call back
// into it through g_run.
class LaunchRun {
 public:
  LaunchRun(const LaunchOptions& options, dim3 grid, dim3 block, size_t smem, InvokeFn invoke, void* closure)
      : options_(options), grid_(grid), block_(block), invoke_(invoke), closure_(closure) {
    threads_ = block.x * block.y * block.z;
    const size_t rounded = (smem + 15) / 16 * 16;
    const size_t pages = (rounded + PageBytes() - 1) / PageBytes() + 1;
    dynamic_ = GuardedMapping(pages * PageBytes(), GuardedMapping::Guard::kLastPage);
    dynamic_base_ = dynamic_.usable() + dynamic_.usable_bytes() - rounded;  // ends at the guard page
    dynamic_bytes_ = smem;
  }

  LaunchResult Execute(AnchorFn anchor);

  // ---- called from CUDA threads ----
  int SyncThreads(BarrierKind kind, int predicate, Site site);
  uint64_t WarpOp(WarpOpKind kind, unsigned mask, uint64_t payload, int64_t param, int width, Site site);
  [[noreturn]] void Trap(Site site);
  unsigned char* dynamic_base() const { return dynamic_base_; }
  bool in_fiber() const { return in_fiber_; }
  // From the fault handler: reports a fault inside a CUDA thread and returns
  // to the scheduler; returns only when the fault is not a CUDA thread's.
  void Fault(int signal, const void* address, const void* stack_pointer);

 private:
  static void FiberMain();
  void PrepareFibers();
  bool RunBlock(uint64_t block_linear);
  void Resume(Fiber* f);
  void Yield(Fiber* f) { SwitchContext(&f->context, &scheduler_); }
  [[noreturn]] void Abandon();
  std::string Where(const Fiber& f) const { return "block " + Coords(block_idx_) + " thread " + Coords(f.tid); }
  unsigned ExistingLanes(unsigned warp) const {
    const unsigned left = threads_ - warp * kWarpLanes;
    return left >= kWarpLanes ? 0xffffffffu : (1u << left) - 1;
  }
  bool CompleteWarpOps();
  void Complete(unsigned warp, const PendingOp& op);
  bool ReleaseBarrier();
  std::string Diagnose() const;

  const LaunchOptions options_;
  const dim3 grid_, block_;
  const InvokeFn invoke_;
  void* const closure_;
  unsigned threads_ = 0;
  GuardedMapping dynamic_;
  unsigned char* dynamic_base_ = nullptr;
  size_t dynamic_bytes_ = 0;
  unsigned char* tls_begin_ = nullptr;
  size_t tls_bytes_ = 0;

  // The block being run.
  uint3 block_idx_{0, 0, 0};
  std::vector<Fiber*> fibers_;
  std::vector<std::vector<PendingOp>> warp_ops_;
  std::vector<uint64_t> order_;
  std::mt19937_64 rng_;
  unsigned live_ = 0;
  Context scheduler_;
  Context abandoned_;  // where a fiber that never resumes saves itself
  Fiber* current_ = nullptr;
  volatile bool in_fiber_ = false;
  pthread_t worker_{};  // the thread running the fibers (faults elsewhere are not theirs)
  std::string error_;
  char fault_[512] = {0};  // written by the fault handler (no allocation there)
};

}  // namespace host_cuda::detail

#endif  // RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_RUN_H_
