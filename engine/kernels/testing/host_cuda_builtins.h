// The CUDA built-ins that kernel source uses, defined for the host compiler:
// part of the host_cuda harness (include host_cuda.h, which explains it, not
// this header). Each built-in here behaves as on the device, within the model
// host_cuda.h describes; the CUDA toolkit's own host headers supply dim3,
// uint3, float2/float4, make_float4, __half, __nv_bfloat16 and their
// conversions (the device's rounding, bit for bit).
#ifndef RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_BUILTINS_H_
#define RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_BUILTINS_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <math.h>  // expf, logf, isfinite, ... in the global namespace, as device code calls them

#include <cstdint>
#include <cstring>
#include <type_traits>

// Defined while kernel source is compiled for the host, so that a device
// helper header can leave out what the harness provides (DynamicSharedMemory).
#define HOST_CUDA_EMULATION 1

// ---- declaration specifiers: no-ops ----
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __align__
#undef __constant__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __constant__
// Static shared memory: one instance per worker thread, which runs one block
// at a time; the harness poisons it at every block start (host_cuda.h).
// `extern __shared__` does not compile with it: use DynamicSharedMemory<T>().
#define __shared__ static thread_local __attribute__((used))

// ---- built-in variables (set by the harness before a CUDA thread runs) ----
namespace host_cuda::detail {
struct Builtins {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
};
extern Builtins builtins;
}  // namespace host_cuda::detail

// Read-only views (variables, not macros: CUDA's host headers use these
// names for parameters).
inline const uint3& threadIdx = host_cuda::detail::builtins.thread_idx;
inline const uint3& blockIdx = host_cuda::detail::builtins.block_idx;
inline const dim3& blockDim = host_cuda::detail::builtins.block_dim;
inline const dim3& gridDim = host_cuda::detail::builtins.grid_dim;
constexpr int warpSize = 32;

// ---- the harness's entry points (host_cuda.cc); called from CUDA threads ----
namespace host_cuda::detail {

enum class BarrierKind : uint8_t { kSync, kCount, kAnd, kOr };
enum class WarpOpKind : uint8_t { kSyncWarp, kShfl, kShflUp, kShflDown, kShflXor, kAll, kAny, kBallot };

// Waits until every thread of the block reaches the same barrier; returns the
// barrier's reduction of the predicates (count, and, or; 0 for kSync).
int SyncThreads(BarrierKind kind, int predicate, const char* file, int line);
// Waits until the lanes of `mask` (those that exist) reach the same warp
// operation; returns this lane's result: the shuffled payload (all bits set
// when the source lane is inactive: undefined on the device), the vote, or 0.
// `param` is the shuffle's source lane, delta or lane mask; `payload` holds
// the value (shuffles) or the predicate (votes).
uint64_t WarpOp(WarpOpKind kind, unsigned mask, uint64_t payload, int64_t param, int width, const char* file, int line);
[[noreturn]] void Trap(const char* file, int line);
unsigned char* DynamicSharedBase();

template <typename T>
uint64_t ToBits(const T& v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move values of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  return bits;
}

template <typename T>
T FromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

}  // namespace host_cuda::detail

// ---- block barriers ----
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  host_cuda::detail::SyncThreads(host_cuda::detail::BarrierKind::kSync, 1, file, line);
}
inline int __syncthreads_count(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return host_cuda::detail::SyncThreads(host_cuda::detail::BarrierKind::kCount, predicate, file, line);
}
inline int __syncthreads_and(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return host_cuda::detail::SyncThreads(host_cuda::detail::BarrierKind::kAnd, predicate, file, line);
}
inline int __syncthreads_or(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return host_cuda::detail::SyncThreads(host_cuda::detail::BarrierKind::kOr, predicate, file, line);
}

// ---- warp operations (lanes: linear thread index % 32) ----
inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  host_cuda::detail::WarpOp(host_cuda::detail::WarpOpKind::kSyncWarp, mask, 0, 0, warpSize, file, line);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) {
  return host_cuda::detail::FromBits<T>(host_cuda::detail::WarpOp(
      host_cuda::detail::WarpOpKind::kShfl, mask, host_cuda::detail::ToBits(var), src_lane, width, file, line));
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize, const char* file = __builtin_FILE(),
                 int line = __builtin_LINE()) {
  return host_cuda::detail::FromBits<T>(host_cuda::detail::WarpOp(
      host_cuda::detail::WarpOpKind::kShflUp, mask, host_cuda::detail::ToBits(var), delta, width, file, line));
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize, const char* file = __builtin_FILE(),
                   int line = __builtin_LINE()) {
  return host_cuda::detail::FromBits<T>(host_cuda::detail::WarpOp(
      host_cuda::detail::WarpOpKind::kShflDown, mask, host_cuda::detail::ToBits(var), delta, width, file, line));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize, const char* file = __builtin_FILE(),
                  int line = __builtin_LINE()) {
  return host_cuda::detail::FromBits<T>(host_cuda::detail::WarpOp(
      host_cuda::detail::WarpOpKind::kShflXor, mask, host_cuda::detail::ToBits(var), lane_mask, width, file, line));
}

inline int __all_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return static_cast<int>(
      host_cuda::detail::WarpOp(host_cuda::detail::WarpOpKind::kAll, mask, predicate != 0, 0, warpSize, file, line));
}
inline int __any_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return static_cast<int>(
      host_cuda::detail::WarpOp(host_cuda::detail::WarpOpKind::kAny, mask, predicate != 0, 0, warpSize, file, line));
}
inline unsigned __ballot_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  return static_cast<unsigned>(
      host_cuda::detail::WarpOp(host_cuda::detail::WarpOpKind::kBallot, mask, predicate != 0, 0, warpSize, file, line));
}

// ---- traps, fences, loads ----
[[noreturn]] inline void __trap(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  host_cuda::detail::Trap(file, line);
}
// Threads interleave only at barriers and warp operations, so a fence orders
// nothing the schedule does not already order; it stays a compiler barrier.
inline void __threadfence() { asm volatile("" ::: "memory"); }
inline void __threadfence_block() { asm volatile("" ::: "memory"); }
inline void __threadfence_system() { asm volatile("" ::: "memory"); }
template <typename T>
T __ldg(const T* p) {
  return *p;
}

// ---- dynamic shared memory ----
// The launch's dynamic_smem_bytes, 16-byte aligned, poisoned at every block
// start: what `extern __shared__ __align__(16) unsigned char smem[]` names on
// the device. Kernel source calls DynamicSharedMemory<T>(); for nvcc a device
// header defines the same name (host_cuda.h shows it).
template <typename T = unsigned char>
T* DynamicSharedMemory() {
  return reinterpret_cast<T*>(host_cuda::detail::DynamicSharedBase());
}

// ---- atomics: no other thread runs between a thread's sync points, so a
// read-modify-write is atomic; each returns the old value, as on the device ----
namespace host_cuda::detail {
template <typename T, typename F>
T AtomicUpdate(T* address, F update) {
  const T old = *address;
  *address = update(old);
  return old;
}
template <typename T>
T AtomicMax(T* a, T v) {
  return AtomicUpdate(a, [v](T o) { return o < v ? v : o; });
}
template <typename T>
T AtomicMin(T* a, T v) {
  return AtomicUpdate(a, [v](T o) { return v < o ? v : o; });
}
template <typename T>
T AtomicCas(T* a, T compare, T v) {
  return AtomicUpdate(a, [compare, v](T o) { return o == compare ? v : o; });
}
template <typename T>
T AtomicExch(T* a, T v) {
  return AtomicUpdate(a, [v](T) { return v; });
}
}  // namespace host_cuda::detail

// Integers wrap as on the device (unsigned arithmetic, then back).
inline int atomicAdd(int* a, int v) {
  return host_cuda::detail::AtomicUpdate(
      a, [v](int o) { return static_cast<int>(static_cast<unsigned>(o) + static_cast<unsigned>(v)); });
}
inline unsigned atomicAdd(unsigned* a, unsigned v) {
  return host_cuda::detail::AtomicUpdate(a, [v](unsigned o) { return o + v; });
}
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) {
  return host_cuda::detail::AtomicUpdate(a, [v](unsigned long long o) { return o + v; });
}
inline float atomicAdd(float* a, float v) {
  return host_cuda::detail::AtomicUpdate(a, [v](float o) { return o + v; });
}
inline double atomicAdd(double* a, double v) {
  return host_cuda::detail::AtomicUpdate(a, [v](double o) { return o + v; });
}
inline int atomicSub(int* a, int v) {
  return host_cuda::detail::AtomicUpdate(
      a, [v](int o) { return static_cast<int>(static_cast<unsigned>(o) - static_cast<unsigned>(v)); });
}
inline unsigned atomicSub(unsigned* a, unsigned v) {
  return host_cuda::detail::AtomicUpdate(a, [v](unsigned o) { return o - v; });
}
inline int atomicMax(int* a, int v) { return host_cuda::detail::AtomicMax(a, v); }
inline unsigned atomicMax(unsigned* a, unsigned v) { return host_cuda::detail::AtomicMax(a, v); }
inline long long atomicMax(long long* a, long long v) { return host_cuda::detail::AtomicMax(a, v); }
inline unsigned long long atomicMax(unsigned long long* a, unsigned long long v) {
  return host_cuda::detail::AtomicMax(a, v);
}
inline int atomicMin(int* a, int v) { return host_cuda::detail::AtomicMin(a, v); }
inline unsigned atomicMin(unsigned* a, unsigned v) { return host_cuda::detail::AtomicMin(a, v); }
inline long long atomicMin(long long* a, long long v) { return host_cuda::detail::AtomicMin(a, v); }
inline unsigned long long atomicMin(unsigned long long* a, unsigned long long v) {
  return host_cuda::detail::AtomicMin(a, v);
}
inline int atomicCAS(int* a, int compare, int v) { return host_cuda::detail::AtomicCas(a, compare, v); }
inline unsigned atomicCAS(unsigned* a, unsigned compare, unsigned v) {
  return host_cuda::detail::AtomicCas(a, compare, v);
}
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long compare, unsigned long long v) {
  return host_cuda::detail::AtomicCas(a, compare, v);
}
inline unsigned short atomicCAS(unsigned short* a, unsigned short compare, unsigned short v) {
  return host_cuda::detail::AtomicCas(a, compare, v);
}
inline int atomicExch(int* a, int v) { return host_cuda::detail::AtomicExch(a, v); }
inline unsigned atomicExch(unsigned* a, unsigned v) { return host_cuda::detail::AtomicExch(a, v); }
inline unsigned long long atomicExch(unsigned long long* a, unsigned long long v) {
  return host_cuda::detail::AtomicExch(a, v);
}
inline float atomicExch(float* a, float v) { return host_cuda::detail::AtomicExch(a, v); }
inline int atomicAnd(int* a, int v) {
  return host_cuda::detail::AtomicUpdate(a, [v](int o) { return o & v; });
}
inline unsigned atomicAnd(unsigned* a, unsigned v) {
  return host_cuda::detail::AtomicUpdate(a, [v](unsigned o) { return o & v; });
}
inline int atomicOr(int* a, int v) {
  return host_cuda::detail::AtomicUpdate(a, [v](int o) { return o | v; });
}
inline unsigned atomicOr(unsigned* a, unsigned v) {
  return host_cuda::detail::AtomicUpdate(a, [v](unsigned o) { return o | v; });
}
inline int atomicXor(int* a, int v) {
  return host_cuda::detail::AtomicUpdate(a, [v](int o) { return o ^ v; });
}
inline unsigned atomicXor(unsigned* a, unsigned v) {
  return host_cuda::detail::AtomicUpdate(a, [v](unsigned o) { return o ^ v; });
}
// ((old >= v) ? 0 : old + 1) and (((old == 0) || (old > v)) ? v : old - 1), as documented.
inline unsigned atomicInc(unsigned* a, unsigned v) {
  return host_cuda::detail::AtomicUpdate(a, [v](unsigned o) { return o >= v ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* a, unsigned v) {
  return host_cuda::detail::AtomicUpdate(a, [v](unsigned o) { return o == 0 || o > v ? v : o - 1; });
}

// ---- device math: the host's libm and IEEE arithmetic. The intrinsics keep
// the device's formulas (__expf is exp2 of x * log2(e)), not its ulp errors ----
inline float __expf(float x) { return exp2f(x * 1.44269504088896341f); }
inline float __logf(float x) { return log2f(x) * 0.693147180559945309f; }
inline float __exp10f(float x) { return exp2f(x * 3.32192809488736235f); }
inline float __powf(float x, float y) { return exp2f(y * log2f(x)); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }

// ---- CUDA's min/max overloads (crt/math_functions.hpp: the same set, so a
// call that is ambiguous for nvcc is ambiguous here) ----
// Mixed signedness compares in the unsigned type R, as CUDA does.
#define HOST_CUDA_MIN_MAX(R, A, B)                                                        \
  inline R min(const A a, const B b) {                                                    \
    return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); \
  }                                                                                       \
  inline R max(const A a, const B b) {                                                    \
    return static_cast<R>(a) > static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); \
  }
HOST_CUDA_MIN_MAX(int, int, int)
HOST_CUDA_MIN_MAX(unsigned int, unsigned int, unsigned int)
HOST_CUDA_MIN_MAX(unsigned int, int, unsigned int)
HOST_CUDA_MIN_MAX(unsigned int, unsigned int, int)
HOST_CUDA_MIN_MAX(long int, long int, long int)
HOST_CUDA_MIN_MAX(unsigned long int, unsigned long int, unsigned long int)
HOST_CUDA_MIN_MAX(unsigned long int, long int, unsigned long int)
HOST_CUDA_MIN_MAX(unsigned long int, unsigned long int, long int)
HOST_CUDA_MIN_MAX(long long int, long long int, long long int)
HOST_CUDA_MIN_MAX(unsigned long long int, unsigned long long int, unsigned long long int)
HOST_CUDA_MIN_MAX(unsigned long long int, long long int, unsigned long long int)
HOST_CUDA_MIN_MAX(unsigned long long int, unsigned long long int, long long int)
#undef HOST_CUDA_MIN_MAX
inline float min(const float a, const float b) { return fminf(a, b); }
inline float max(const float a, const float b) { return fmaxf(a, b); }
inline double min(const double a, const double b) { return fmin(a, b); }
inline double max(const double a, const double b) { return fmax(a, b); }
inline double min(const float a, const double b) { return fmin(a, b); }
inline double max(const float a, const double b) { return fmax(a, b); }
inline double min(const double a, const float b) { return fmin(a, b); }
inline double max(const double a, const float b) { return fmax(a, b); }
inline unsigned int umin(const unsigned int a, const unsigned int b) { return min(a, b); }
inline unsigned int umax(const unsigned int a, const unsigned int b) { return max(a, b); }
inline long long int llmin(const long long int a, const long long int b) { return min(a, b); }
inline long long int llmax(const long long int a, const long long int b) { return max(a, b); }
inline unsigned long long int ullmin(const unsigned long long int a, const unsigned long long int b) {
  return min(a, b);
}
inline unsigned long long int ullmax(const unsigned long long int a, const unsigned long long int b) {
  return max(a, b);
}

// ---- bits ----
inline int __float_as_int(float x) { return host_cuda::detail::FromBits<int>(host_cuda::detail::ToBits(x)); }
inline unsigned __float_as_uint(float x) { return host_cuda::detail::FromBits<unsigned>(host_cuda::detail::ToBits(x)); }
inline float __int_as_float(int x) { return host_cuda::detail::FromBits<float>(host_cuda::detail::ToBits(x)); }
inline float __uint_as_float(unsigned x) { return host_cuda::detail::FromBits<float>(host_cuda::detail::ToBits(x)); }
inline long long __double_as_longlong(double x) {
  return host_cuda::detail::FromBits<long long>(host_cuda::detail::ToBits(x));
}
inline double __longlong_as_double(long long x) {
  return host_cuda::detail::FromBits<double>(host_cuda::detail::ToBits(x));
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

#endif  // RINGMASTER_ENGINE_KERNELS_TESTING_HOST_CUDA_BUILTINS_H_
