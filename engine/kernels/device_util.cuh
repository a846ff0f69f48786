// Device helpers of the kernels (the *_kernels.cuh files): storage types and
// their conversions, rounding, 16-byte packs, warp and block reductions and
// the dropout hash.
//
// Compiled by nvcc (through kernel_util.cuh) and by the host emulation harness
// (engine/kernels/testing/host_cuda.h), so it includes only the fp16/bf16
// headers (usable on the host) and <cstdint>; the includer provides the CUDA
// built-ins (threadIdx, blockIdx, blockDim, gridDim, __syncthreads,
// __shfl_xor_sync) and the math functions (expf, tanhf, ...).
//
// Storage types: float, __half and __nv_bfloat16. Every conversion to a
// 16-bit type rounds to nearest even, as engine::RoundTo on the CPU.
#ifndef RINGMASTER_ENGINE_KERNELS_DEVICE_UTIL_CUH_
#define RINGMASTER_ENGINE_KERNELS_DEVICE_UTIL_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace ringmaster::kernels {

// Block size of the grid-stride kernels.
constexpr int kThreads = 256;

// Launch arithmetic (host code, shared by the launchers and the host tests).
// Blocks for a grid-stride loop over n work items (capped: the loop covers the rest).
inline unsigned GridFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// Blocks of `per_block` rows for `rows` rows.
inline unsigned BlocksFor(int64_t rows, int per_block) {
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

// ---- Storage types ----------------------------------------------------------

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

// v stored as T (round to nearest even).
template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// v rounded to T and back (the identity for float).
template <typename T>
__device__ __forceinline__ float RoundTo(float v) {
  return ToFloat(FromFloat<T>(v));
}

// Sixteen bytes of T: the unit of the vectorised loads and stores.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
  T v[kSize];
};

// out[0..K) = p[0..K) as floats. K * sizeof(T) a multiple of 16 with p
// 16-byte aligned (whole packs), or any K (element by element).
template <int K, typename T>
__device__ __forceinline__ void LoadFloats(const T* p, float (&out)[K]) {
  if constexpr (K * sizeof(T) % 16 == 0) {
    constexpr int kP = Pack<T>::kSize;
    for (int q = 0; q < K / kP; ++q) {
      const Pack<T> pk = reinterpret_cast<const Pack<T>*>(p)[q];
      for (int e = 0; e < kP; ++e) out[q * kP + e] = ToFloat(pk.v[e]);
    }
  } else {
    for (int e = 0; e < K; ++e) out[e] = ToFloat(p[e]);
  }
}

// p[0..K) = in[0..K) stored as T; alignment as LoadFloats.
template <int K, typename T>
__device__ __forceinline__ void StoreFloats(T* p, const float (&in)[K]) {
  if constexpr (K * sizeof(T) % 16 == 0) {
    constexpr int kP = Pack<T>::kSize;
    for (int q = 0; q < K / kP; ++q) {
      Pack<T> pk;
      for (int e = 0; e < kP; ++e) pk.v[e] = FromFloat<T>(in[q * kP + e]);
      reinterpret_cast<Pack<T>*>(p)[q] = pk;
    }
  } else {
    for (int e = 0; e < K; ++e) p[e] = FromFloat<T>(in[e]);
  }
}

// True for a finite x: x - x is 0 exactly then, NaN for inf and NaN (no
// reliance on isfinite, which the host harness's math headers may not declare
// where the kernels look).
__device__ __forceinline__ bool IsFinite(float x) { return x - x == 0.0f; }
__device__ __forceinline__ bool IsFinite(double x) { return x - x == 0.0; }

// ---- Grid-stride loops ------------------------------------------------------

__device__ __forceinline__ int64_t GlobalThread() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ __forceinline__ int64_t GlobalStride() { return int64_t{blockDim.x} * gridDim.x; }

// ---- Reductions -------------------------------------------------------------
// Butterfly (xor) shuffles: every lane ends with the same, bitwise equal sum
// (each step adds the same two values in either order), in a fixed order.

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread
// gets the result. `scratch` holds 32 floats of shared memory; every thread
// of the block must call.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return WarpSum(v);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(v);
}

// ---- Dropout's hash -----------------------------------------------------------
// engine/core/random.h's SplitMix64 and HashUniform, bit for bit.

__device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits, from (key, index).
__device__ __forceinline__ float HashUniform(uint64_t key, uint64_t index) {
  const uint64_t h = SplitMix64(key ^ SplitMix64(index));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_DEVICE_UTIL_CUH_
