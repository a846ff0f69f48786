// LayerNorm kernels (layernorm.h): one warp per row, kLnWarps rows per block
// (block kLnWarps * 32 threads, grid ceil(rows / kLnWarps)). A lane owns the
// columns lane * K + 32 * K * i (K = 1, or a 16-byte pack of T when c is a
// multiple of the pack and every row pointer is 16-byte aligned) and walks
// them once per pass; statistics are fp32 warp sums (a fixed shuffle tree).
//
// Included by layernorm.cu and by the host emulation tests; includes only
// device_util.cuh (the includer provides the CUDA built-ins).
#ifndef RINGMASTER_ENGINE_KERNELS_LAYERNORM_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_LAYERNORM_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::layernorm {

constexpr int kLnWarps = 8;
constexpr int kLnThreads = kLnWarps * 32;

// One row: with b null, LayerNorm of x; with b, s = a + b is stored to `sum`
// and normalised (later passes re-read `sum`: this lane's own writes).
template <int K, typename T>
__device__ __forceinline__ void ForwardRow(const T* x, const T* b, T* sum, const float* gamma, const float* beta,
                                           float eps, int64_t c, T* y, float* mean, float* rstd, int lane) {
  const int64_t step = 32 * K;
  float total = 0.0f;
  const T* p = x;
  if (b != nullptr) {
    for (int64_t j = lane * K; j < c; j += step) {
      float va[K], vb[K];
      LoadFloats<K>(x + j, va);
      LoadFloats<K>(b + j, vb);
      for (int e = 0; e < K; ++e) {
        va[e] = RoundTo<T>(va[e] + vb[e]);  // the stored value, which the statistics see
        total += va[e];
      }
      StoreFloats<K>(sum + j, va);
    }
    p = sum;
  } else {
    for (int64_t j = lane * K; j < c; j += step) {
      float v[K];
      LoadFloats<K>(x + j, v);
      for (int e = 0; e < K; ++e) total += v[e];
    }
  }
  const float m = WarpSum(total) / static_cast<float>(c);
  float sq = 0.0f;
  for (int64_t j = lane * K; j < c; j += step) {
    float v[K];
    LoadFloats<K>(p + j, v);
    for (int e = 0; e < K; ++e) sq += (v[e] - m) * (v[e] - m);
  }
  const float s = 1.0f / sqrtf(WarpSum(sq) / static_cast<float>(c) + eps);
  for (int64_t j = lane * K; j < c; j += step) {
    float v[K], g[K], bt[K];
    LoadFloats<K>(p + j, v);
    LoadFloats<K>(gamma + j, g);
    LoadFloats<K>(beta + j, bt);
    for (int e = 0; e < K; ++e) v[e] = (v[e] - m) * s * g[e] + bt[e];
    StoreFloats<K>(y + j, v);
  }
  if (lane == 0) {
    *mean = m;
    *rstd = s;
  }
}

template <int K, typename T>
__global__ void __launch_bounds__(kLnThreads)
    LayerNormForwardKernel(const T* x, const T* b, T* sum, const float* gamma, const float* beta, float eps,
                           int64_t rows, int64_t c, T* y, float* mean, float* rstd) {
  const int64_t r = blockIdx.x * int64_t{kLnWarps} + threadIdx.x / 32;
  if (r >= rows) return;
  ForwardRow<K>(x + r * c, b != nullptr ? b + r * c : nullptr, sum != nullptr ? sum + r * c : nullptr, gamma,
                beta, eps, c, y + r * c, mean + r, rstd + r, threadIdx.x % 32);
}

template <int K, typename T>
__device__ __forceinline__ void BackwardRow(const T* x, const T* dy, const float* gamma, float m, float s,
                                            const T* residual, int64_t c, T* dx, float* dy_xhat, int lane) {
  const int64_t step = 32 * K;
  float sum_dn = 0.0f, sum_dn_xhat = 0.0f;  // dn = dy * gamma
  for (int64_t j = lane * K; j < c; j += step) {
    float v[K], g[K], w[K], gx[K];
    LoadFloats<K>(x + j, v);
    LoadFloats<K>(dy + j, g);
    LoadFloats<K>(gamma + j, w);
    for (int e = 0; e < K; ++e) {
      const float xhat = (v[e] - m) * s;
      const float dn = g[e] * w[e];
      sum_dn += dn;
      sum_dn_xhat += dn * xhat;
      gx[e] = g[e] * xhat;
    }
    StoreFloats<K>(dy_xhat + j, gx);
  }
  const float mean_dn = WarpSum(sum_dn) / static_cast<float>(c);
  const float mean_dn_xhat = WarpSum(sum_dn_xhat) / static_cast<float>(c);
  for (int64_t j = lane * K; j < c; j += step) {
    float v[K], g[K], w[K];
    LoadFloats<K>(x + j, v);
    LoadFloats<K>(dy + j, g);
    LoadFloats<K>(gamma + j, w);
    for (int e = 0; e < K; ++e) {
      const float xhat = (v[e] - m) * s;
      g[e] = s * (g[e] * w[e] - mean_dn - xhat * mean_dn_xhat);
    }
    if (residual != nullptr) {
      float rv[K];
      LoadFloats<K>(residual + j, rv);
      for (int e = 0; e < K; ++e) g[e] = rv[e] + RoundTo<T>(g[e]);  // LayerNorm's stored dx, then the add
    }
    StoreFloats<K>(dx + j, g);
  }
}

template <int K, typename T>
__global__ void __launch_bounds__(kLnThreads)
    LayerNormBackwardKernel(const T* x, const T* dy, const float* gamma, const float* mean, const float* rstd,
                            const T* residual, int64_t rows, int64_t c, T* dx, float* dy_xhat) {
  const int64_t r = blockIdx.x * int64_t{kLnWarps} + threadIdx.x / 32;
  if (r >= rows) return;
  BackwardRow<K>(x + r * c, dy + r * c, gamma, mean[r], rstd[r], residual != nullptr ? residual + r * c : nullptr,
                 c, dx + r * c, dy_xhat + r * c, threadIdx.x % 32);
}

}  // namespace ringmaster::kernels::layernorm

#endif  // RINGMASTER_ENGINE_KERNELS_LAYERNORM_KERNELS_CUH_
