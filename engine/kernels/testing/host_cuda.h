// host_cuda: the project's own CUDA kernel source, run on the host, so that
// every kernel is tested against its CPU twin without a GPU.
//
// WHAT IT DOES. Launch() runs a __global__ function over a grid of blocks:
// every CUDA thread of a block is a fiber with its own stack, all on one
// worker OS thread, and a fiber runs until it reaches __syncthreads, a
// warp operation (__shfl*_sync, __all/__any/__ballot_sync, __syncwarp) or its
// end; then the next one runs. Which one is the launch's Schedule:
//   kInOrder   threads by linear index, blocks by linear index;
//   kReversed  both backwards;
//   kShuffled  a seeded permutation, drawn afresh between sync points.
// The same launch and schedule give the same interleaving, every run. Each
// thread runs as far as it can before the next starts, so a missing barrier
// shows: a thread reads shared memory that no thread has written yet
// (poison), or that a later phase has already overwritten; the schedules
// differ in which thread gets ahead, so a test runs them all (TestSchedules()).
//
// The model, as on the device:
//   - dim3 grids and blocks; threadIdx/blockIdx/blockDim/gridDim, warpSize.
//     Blocks run one after another.
//   - __syncthreads (and _count/_and/_or): every thread of the block, at the
//     same barrier (same file:line).
//   - Warps: lanes are linear thread index % 32. A warp operation completes
//     when every lane of its mask has reached it (same operation, mask and
//     width); shuffles follow PTX shfl.sync (width segments; out-of-range
//     sources return the lane's own value). Lanes past the end of a partial
//     last warp are inactive: votes leave them out, and a shuffle from one
//     (or from any lane not in the mask) returns all bits set (NaN for float,
//     -1 for int): undefined on the device, visible here.
//   - Atomics (add/sub/exch/min/max/cas/and/or/xor/inc/dec on CUDA's types),
//     fences, __ldg, __trap.
//   - Shared memory: `__shared__` arrays in kernels (static thread-locals of
//     the worker thread) and dynamic shared memory sized by the launch
//     (DynamicSharedMemory<T>(), below), both POISONED with 0xFF bytes at the
//     start of every block (NaN as float, half, bf16 or double; -1 as an
//     integer), so a read before a write shows. The poison covers the whole
//     thread-local block of the module that calls Launch, on the worker
//     thread only: kernels may not keep other thread_local state (CUDA has
//     none).
//   - fp16/bf16: __half, __nv_bfloat16 and their conversions from CUDA's own
//     <cuda_fp16.h>/<cuda_bf16.h>, whose host code rounds as the device does.
//   - Math: the host's libm for expf/logf/tanhf/sqrtf/...; fmaf is a fused
//     multiply-add. INFINITY, isfinite, float2/float4/make_float4 as usual.
//   - Specifiers (__global__ __device__ __host__ __forceinline__
//     __launch_bounds__ __align__ __restrict__) are no-ops or their GCC
//     equivalents. `#pragma unroll` needs -Wno-unknown-pragmas.
//
// What a launch DETECTS (it fails with a message naming the block, the
// thread and the file:line):
//   - a __syncthreads that not every thread reaches: one waits at another
//     barrier or at a warp operation (a deadlock on the device), or exited
//     (stricter than the hardware, whose bar.sync waits only for the threads
//     that have not exited; CUDA leaves a barrier in divergent code undefined);
//   - a warp operation whose mask names a lane that exited (again excused by
//     the hardware, undefined in CUDA) or that never arrives, or that omits
//     the calling lane; a shuffle width that is not a power of two up to 32;
//   - __trap();
//   - a CUDA thread overflowing its stack (LaunchOptions::stack_bytes), an
//     access past the end of dynamic shared memory (to the next 16 bytes),
//     and any other SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT (abort, a failed
//     assert) inside a CUDA thread, reported as that thread's error instead
//     of a crash;
//   - an invalid launch configuration (as cudaErrorInvalidConfiguration).
//
// What it does NOT model: timing and performance; memory coalescing, bank
// conflicts, caches; warp divergence beyond lockstep at sync points (lanes
// run independently between them, which exposes code that relies on implicit
// warp-synchronous execution); the compiler's code generation (registers,
// spills, instruction selection); floating-point differences of device code
// (nvcc contracts a * b + c into FMAs, the host compiler does not without
// -mfma; __expf/rsqrtf/__fdividef use libm, not the device's approximations);
// the memory model between threads (threads interleave only at sync points,
// so every atomic is trivially atomic, fences are no-ops, and spinning on a
// flag that another thread or block sets hangs); out-of-bounds accesses to
// global or static shared memory (no bounds are known); `extern __shared__`
// (use DynamicSharedMemory); constant/texture memory, cooperative groups,
// clusters, async copies, tensor cores. Launches in one process run one at a
// time.
//
// HOW TO ADD A KERNEL'S HOST TEST.
//   1. Keep the kernels in engine/kernels/<name>_kernels.cuh, including only
//      device helpers that also compile on the host; the includer provides the
//      CUDA built-ins. For dynamic shared memory call DynamicSharedMemory<T>()
//      and let the device helper header define it for nvcc:
//        #ifndef HOST_CUDA_EMULATION
//        template <typename T = unsigned char>
//        __device__ __forceinline__ T* DynamicSharedMemory() {
//          extern __shared__ __align__(16) unsigned char dynamic_smem[];
//          return reinterpret_cast<T*>(dynamic_smem);
//        }
//        #endif
//   2. The test, e.g. engine/kernels/<name>_host_test.cc:
//        #include "engine/kernels/testing/host_cuda.h"  // first: the built-ins
//        #include "engine/kernels/<name>_kernels.cuh"
//        ...
//        for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
//          SCOPED_TRACE(host_cuda::ToString(schedule));
//          std::vector<float> out(n, NAN);  // unwritten outputs stay NaN
//          ASSERT_TRUE(host_cuda::Launch(schedule, grid, block, smem_bytes, foo::FooKernel,
//                                        x.data(), out.data(), n));
//          // compare `out` with the CPU backend's op (or the reference op)
//        }
//      with the grid, block and shared memory the .cu launcher uses (share
//      the arithmetic through a plain header where it is not trivial).
//      Host memory stands in for device memory: pass vectors' data().
//   3. BUILD: host_cuda_test from //engine/kernels/testing:host_cuda.bzl, with
//      the .cuh in a testonly cc_library's textual_hdrs. The test exists where
//      the build has the CUDA toolkit's headers (it needs no GPU); in a
//      CPU-only build (--config=cpu) it is not defined, and :host_cuda is an
//      empty library (header-only helpers that name it still load; nothing
//      that compiles against it may exist there).
#ifndef RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_H_
#define RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/kernels/testing/host_cuda_builtins.h"

namespace host_cuda {

// The order in which runnable CUDA threads (and blocks) run; see above.
enum class Schedule : uint8_t { kInOrder, kReversed, kShuffled };

struct LaunchOptions {
  Schedule schedule = Schedule::kInOrder;
  uint64_t seed = 1;                      // kShuffled's permutations
  size_t stack_bytes = size_t{64} << 10;  // per CUDA thread; at least 16 KiB
};

// The schedules a kernel test runs: in order, reversed, shuffled (seed 1).
std::vector<LaunchOptions> TestSchedules();
// "in order", "reversed", "shuffled (seed 1)".
std::string ToString(const LaunchOptions& options);

// The launch's outcome: ok, or the first error (naming block, thread, file:line).
struct LaunchResult {
  bool ok = true;
  std::string error;
  // ASSERT_TRUE(host_cuda::Launch(...)) prints `error` when the launch fails.
  operator ::testing::AssertionResult() const {  // NOLINT: implicit for gtest
    return ok ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << error;
  }
};

namespace detail {
using InvokeFn = void (*)(void* closure);
using AnchorFn = void* (*)();
// A thread-local of each translation unit that includes this header: Launch
// finds, from its address on the worker thread, the module's thread-local
// block (where that module's static __shared__ variables live) to poison.
[[maybe_unused]] static thread_local char tls_anchor = 0;

LaunchResult Run(const LaunchOptions& options, dim3 grid, dim3 block, size_t dynamic_smem_bytes, InvokeFn invoke,
                 void* closure, AnchorFn anchor);
}  // namespace detail

// Runs kernel(args...) as every thread of `grid` x `block`, with
// dynamic_smem_bytes of dynamic shared memory, and returns when all blocks
// have finished or the first error stopped the launch. `kernel` is a
// __global__ function (a template instantiated explicitly, e.g.
// FooKernel<float>) or any callable; each CUDA thread gets its own copy of
// the arguments, converted to the kernel's parameter types. Pointers are host
// memory. Thread-safe; launches run one at a time.
template <typename Kernel, typename... Args>
LaunchResult Launch(const LaunchOptions& options, dim3 grid, dim3 block, size_t dynamic_smem_bytes, Kernel&& kernel,
                    Args&&... args) {
  struct Closure {
    std::decay_t<Kernel> kernel;
    std::tuple<std::decay_t<Args>...> args;
  };
  Closure closure{std::forward<Kernel>(kernel), std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)};
  const detail::InvokeFn invoke = [](void* p) {
    Closure& c = *static_cast<Closure*>(p);
    std::apply([&c](const auto&... a) { c.kernel(a...); }, c.args);
  };
  const detail::AnchorFn anchor = []() -> void* { return &detail::tls_anchor; };
  return detail::Run(options, grid, block, dynamic_smem_bytes, invoke, &closure, anchor);
}

// The same with the default options (Schedule::kInOrder).
template <typename Kernel, typename... Args>
LaunchResult Launch(dim3 grid, dim3 block, size_t dynamic_smem_bytes, Kernel&& kernel, Args&&... args) {
  return Launch(LaunchOptions{}, grid, block, dynamic_smem_bytes, std::forward<Kernel>(kernel),
                std::forward<Args>(args)...);
}

}  // namespace host_cuda

#endif  // RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_H_
