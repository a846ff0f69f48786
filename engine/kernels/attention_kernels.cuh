// Attention kernels (attention.h).
//   SplitHeadsKernel, MergeQkvGradsKernel, MergeHeadsKernel: grid-stride over
//     the [b, nh, t, hd / units] items, kThreads threads, any grid. U is the
//     unit moved: an element (float, __half, __nv_bfloat16) or a 16-byte Pack
//     of them when hd is whole packs and the pointers are aligned; `d.hd`
//     counts units. Pure moves: no arithmetic, no rounding.
//   CausalSoftmaxKernel, CausalSoftmaxBackwardKernel: one warp per row,
//     kAttnWarps rows per block (kAttnWarps * 32 threads, grid
//     ceil(rows / kAttnWarps)); f32 storage, values rounded to R (float: none).
//
// Included by attention.cu and by the host emulation tests; includes only
// device_util.cuh (the includer provides the CUDA built-ins and AttentionDims,
// from attention.h).
#ifndef RINGMASTER_ENGINE_KERNELS_ATTENTION_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_ATTENTION_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::attention {

constexpr int kAttnWarps = 8;
constexpr int kAttnThreads = kAttnWarps * 32;

// Item idx over [b, nh, t, hd] -> offset of that item's first part in [b, t, parts, nh, hd].
__device__ __forceinline__ int64_t FusedOffset(int64_t idx, AttentionDims d, int parts) {
  const int64_t e = idx % d.hd, ti = (idx / d.hd) % d.t, h = (idx / (d.hd * d.t)) % d.nh,
                bi = idx / (d.hd * d.t * d.nh);
  return ((bi * d.t + ti) * parts * d.nh + h) * d.hd + e;
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    SplitHeadsKernel(const U* src, AttentionDims d, int parts, U* dst0, U* dst1, U* dst2) {
  const int64_t n = d.b * d.nh * d.t * d.hd, c = d.nh * d.hd;
  for (int64_t idx = GlobalThread(); idx < n; idx += GlobalStride()) {
    const int64_t o = FusedOffset(idx, d, parts);
    dst0[idx] = src[o];
    if (parts == 3) {
      dst1[idx] = src[o + c];
      dst2[idx] = src[o + 2 * c];
    }
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads)
    MergeQkvGradsKernel(const U* dq, const U* dk, const U* dv, AttentionDims d, U* dqkv) {
  const int64_t n = d.b * d.nh * d.t * d.hd, c = d.nh * d.hd;
  for (int64_t idx = GlobalThread(); idx < n; idx += GlobalStride()) {
    const int64_t o = FusedOffset(idx, d, 3);
    dqkv[o] = dq[idx];
    dqkv[o + c] = dk[idx];
    dqkv[o + 2 * c] = dv[idx];
  }
}

template <typename U>
__global__ void __launch_bounds__(kThreads) MergeHeadsKernel(const U* y, AttentionDims d, U* out) {
  const int64_t n = d.b * d.nh * d.t * d.hd;
  for (int64_t idx = GlobalThread(); idx < n; idx += GlobalStride()) out[FusedOffset(idx, d, 1)] = y[idx];
}

template <typename R>
__global__ void __launch_bounds__(kAttnThreads) CausalSoftmaxKernel(float* att, int64_t rows, int64_t t) {
  const int64_t r = blockIdx.x * int64_t{kAttnWarps} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const int64_t i = r % t;  // query position: keys 0..i are visible
  float* row = att + r * t;
  float mx = -INFINITY;
  for (int64_t j = lane; j <= i; j += 32) mx = fmaxf(mx, row[j]);
  mx = WarpMax(mx);
  float sum = 0.0f;
  for (int64_t j = lane; j <= i; j += 32) sum += expf(row[j] - mx);
  const float inv = 1.0f / WarpSum(sum);
  for (int64_t j = lane; j < t; j += 32) row[j] = j <= i ? RoundTo<R>(expf(row[j] - mx) * inv) : 0.0f;
}

template <typename R>
__global__ void __launch_bounds__(kAttnThreads)
    CausalSoftmaxBackwardKernel(const float* att, float* datt, int64_t rows, int64_t t, float scale) {
  const int64_t r = blockIdx.x * int64_t{kAttnWarps} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const int64_t i = r % t;
  const float* p = att + r * t;
  float* g = datt + r * t;
  float dot = 0.0f;
  for (int64_t j = lane; j <= i; j += 32) dot += p[j] * g[j];
  dot = WarpSum(dot);
  for (int64_t j = lane; j < t; j += 32) g[j] = j <= i ? RoundTo<R>(scale * p[j] * (g[j] - dot)) : 0.0f;
}

}  // namespace ringmaster::kernels::attention

#endif  // RINGMASTER_ENGINE_KERNELS_ATTENTION_KERNELS_CUH_
