// Attention's head packing and causal softmax kernels, then their launchers.
#include "engine/kernels/attention.h"
#include "engine/kernels/kernel_util.cuh"

namespace ringmaster::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;

#define RM_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)

// idx over [b, nh, t, hd] -> offset of that element's first part in [b, t, parts, nh, hd].
__device__ __forceinline__ int64_t FusedOffset(int64_t idx, AttentionDims d, int parts) {
  const int64_t e = idx % d.hd, ti = (idx / d.hd) % d.t, h = (idx / (d.hd * d.t)) % d.nh,
                bi = idx / (d.hd * d.t * d.nh);
  return ((bi * d.t + ti) * parts * d.nh + h) * d.hd + e;
}

__global__ void SplitHeadsKernel(const float* src, AttentionDims d, int parts, float* dst0, float* dst1,
                                 float* dst2) {
  const int64_t n = d.b * d.nh * d.t * d.hd, c = d.nh * d.hd;
  RM_GRID_STRIDE(idx, n) {
    const int64_t o = FusedOffset(idx, d, parts);
    dst0[idx] = src[o];
    if (parts == 3) {
      dst1[idx] = src[o + c];
      dst2[idx] = src[o + 2 * c];
    }
  }
}

__global__ void MergeQkvGradsKernel(const float* dq, const float* dk, const float* dv, AttentionDims d, float* dqkv,
                                    FloatType round) {
  const int64_t n = d.b * d.nh * d.t * d.hd, c = d.nh * d.hd;
  RM_GRID_STRIDE(idx, n) {
    const int64_t o = FusedOffset(idx, d, 3);
    dqkv[o] = RoundTo(round, dq[idx]);
    dqkv[o + c] = RoundTo(round, dk[idx]);
    dqkv[o + 2 * c] = RoundTo(round, dv[idx]);
  }
}

__global__ void MergeHeadsKernel(const float* y, AttentionDims d, float* out, FloatType round) {
  const int64_t n = d.b * d.nh * d.t * d.hd;
  RM_GRID_STRIDE(idx, n) {
    const int64_t e = idx % d.hd, ti = (idx / d.hd) % d.t, h = (idx / (d.hd * d.t)) % d.nh,
                  bi = idx / (d.hd * d.t * d.nh);
    out[((bi * d.t + ti) * d.nh + h) * d.hd + e] = RoundTo(round, y[idx]);
  }
}

#undef RM_GRID_STRIDE

__global__ void CausalSoftmaxKernel(float* att, int64_t rows, int64_t t, FloatType round) {
  const int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
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
  for (int64_t j = lane; j < t; j += 32) row[j] = j <= i ? RoundTo(round, expf(row[j] - mx) * inv) : 0.0f;
}

__global__ void CausalSoftmaxBackwardKernel(const float* att, float* datt, int64_t rows, int64_t t, float scale,
                                            FloatType round) {
  const int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const int64_t i = r % t;
  const float* p = att + r * t;
  float* g = datt + r * t;
  float dot = 0.0f;
  for (int64_t j = lane; j <= i; j += 32) dot += p[j] * g[j];
  dot = WarpSum(dot);
  for (int64_t j = lane; j < t; j += 32) g[j] = j <= i ? RoundTo(round, scale * p[j] * (g[j] - dot)) : 0.0f;
}

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace

cudaError_t LaunchSplitHeads(const float* src, AttentionDims d, int parts, float* dst0, float* dst1, float* dst2,
                             cudaStream_t stream) {
  const int64_t n = d.b * d.nh * d.t * d.hd;
  if (n <= 0) return cudaSuccess;
  SplitHeadsKernel<<<GridFor(n), kThreads, 0, stream>>>(src, d, parts, dst0, dst1, dst2);
  return cudaGetLastError();
}

cudaError_t LaunchMergeQkvGrads(const float* dq, const float* dk, const float* dv, AttentionDims d, float* dqkv,
                                FloatType round, cudaStream_t stream) {
  const int64_t n = d.b * d.nh * d.t * d.hd;
  if (n <= 0) return cudaSuccess;
  MergeQkvGradsKernel<<<GridFor(n), kThreads, 0, stream>>>(dq, dk, dv, d, dqkv, round);
  return cudaGetLastError();
}

cudaError_t LaunchMergeHeads(const float* y, AttentionDims d, float* out, FloatType round, cudaStream_t stream) {
  const int64_t n = d.b * d.nh * d.t * d.hd;
  if (n <= 0) return cudaSuccess;
  MergeHeadsKernel<<<GridFor(n), kThreads, 0, stream>>>(y, d, out, round);
  return cudaGetLastError();
}

cudaError_t LaunchCausalSoftmax(float* att, AttentionDims d, FloatType round, cudaStream_t stream) {
  const int64_t rows = d.b * d.nh * d.t;
  if (rows <= 0) return cudaSuccess;
  CausalSoftmaxKernel<<<RowBlocks(rows), kWarpsPerBlock * 32, 0, stream>>>(att, rows, d.t, round);
  return cudaGetLastError();
}

cudaError_t LaunchCausalSoftmaxBackward(const float* att, float* datt, AttentionDims d, float scale,
                                        FloatType round, cudaStream_t stream) {
  const int64_t rows = d.b * d.nh * d.t;
  if (rows <= 0) return cudaSuccess;
  CausalSoftmaxBackwardKernel<<<RowBlocks(rows), kWarpsPerBlock * 32, 0, stream>>>(att, datt, rows, d.t, scale,
                                                                                   round);
  return cudaGetLastError();
}

}  // namespace ringmaster::kernels
