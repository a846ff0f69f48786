// LayerNorm forward and backward (one warp per row), then their launchers.
#include "engine/kernels/kernel_util.cuh"
#include "engine/kernels/layernorm.h"

namespace ringmaster::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;

// With b null: LayerNorm of x. With b: s = round(x + b) is written to sum and
// normalised (the fused residual add); later passes re-read sum (this
// thread's own writes) instead of x and b.
__global__ void LayerNormForwardKernel(const float* x, const float* b, float* sum, const float* gamma,
                                       const float* beta, float eps, int64_t rows, int64_t c, float* y, float* mean,
                                       float* rstd, FloatType round) {
  const int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  float total = 0.0f;
  const float* p = x + r * c;
  if (b != nullptr) {
    const float* pb = b + r * c;
    float* ps = sum + r * c;
    for (int64_t j = lane; j < c; j += 32) {
      const float v = RoundTo(round, p[j] + pb[j]);
      ps[j] = v;
      total += v;
    }
    p = ps;
  } else {
    for (int64_t j = lane; j < c; j += 32) total += p[j];
  }
  float* q = y + r * c;
  const float m = WarpSum(total) / static_cast<float>(c);
  float sq = 0.0f;
  for (int64_t j = lane; j < c; j += 32) {
    const float d = p[j] - m;
    sq += d * d;
  }
  const float s = rsqrtf(WarpSum(sq) / static_cast<float>(c) + eps);
  for (int64_t j = lane; j < c; j += 32) q[j] = RoundTo(round, (p[j] - m) * s * gamma[j] + beta[j]);
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

__global__ void LayerNormBackwardKernel(const float* x, const float* dy, const float* gamma, const float* mean,
                                        const float* rstd, const float* residual, int64_t rows, int64_t c,
                                        float* dx, float* dy_xhat, FloatType round) {
  const int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const float* p = x + r * c;
  const float* g = dy + r * c;
  const float m = mean[r], s = rstd[r];
  float sum_dn = 0.0f, sum_dn_xhat = 0.0f;
  for (int64_t j = lane; j < c; j += 32) {
    const float xhat = (p[j] - m) * s;
    const float dn = g[j] * gamma[j];
    sum_dn += dn;
    sum_dn_xhat += dn * xhat;
    dy_xhat[r * c + j] = g[j] * xhat;
  }
  const float mean_dn = WarpSum(sum_dn) / static_cast<float>(c);
  const float mean_dn_xhat = WarpSum(sum_dn_xhat) / static_cast<float>(c);
  for (int64_t j = lane; j < c; j += 32) {
    const float xhat = (p[j] - m) * s;
    const float v = RoundTo(round, s * (g[j] * gamma[j] - mean_dn - xhat * mean_dn_xhat));
    dx[r * c + j] = residual != nullptr ? RoundTo(round, residual[r * c + j] + v) : v;
  }
}

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace

cudaError_t LaunchLayerNormForward(const float* x, const float* gamma, const float* beta, float eps, int64_t rows,
                                   int64_t c, float* y, float* mean, float* rstd, FloatType round,
                                   cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  LayerNormForwardKernel<<<RowBlocks(rows), kWarpsPerBlock * 32, 0, stream>>>(x, nullptr, nullptr, gamma, beta, eps,
                                                                              rows, c, y, mean, rstd, round);
  return cudaGetLastError();
}

cudaError_t LaunchAddLayerNormForward(const float* a, const float* b, const float* gamma, const float* beta,
                                      float eps, int64_t rows, int64_t c, float* sum, float* y, float* mean,
                                      float* rstd, FloatType round, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  LayerNormForwardKernel<<<RowBlocks(rows), kWarpsPerBlock * 32, 0, stream>>>(a, b, sum, gamma, beta, eps, rows, c,
                                                                              y, mean, rstd, round);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormBackward(const float* x, const float* dy, const float* gamma, const float* mean,
                                    const float* rstd, const float* residual, int64_t rows, int64_t c, float* dx,
                                    float* dy_xhat, FloatType round, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  LayerNormBackwardKernel<<<RowBlocks(rows), kWarpsPerBlock * 32, 0, stream>>>(x, dy, gamma, mean, rstd, residual,
                                                                               rows, c, dx, dy_xhat, round);
  return cudaGetLastError();
}

}  // namespace ringmaster::kernels
