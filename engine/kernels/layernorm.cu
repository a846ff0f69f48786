// LayerNorm launchers (layernorm.h); the kernels are in layernorm_kernels.cuh.
#include "engine/kernels/kernel_util.cuh"
#include "engine/kernels/layernorm.h"
// After kernel_util.cuh: the kernels use the CUDA built-ins it brings.
#include "engine/kernels/layernorm_kernels.cuh"

namespace ringmaster::kernels {
namespace {

using layernorm::kLnThreads;
using layernorm::kLnWarps;

// Packs when every row starts 16-byte aligned and c is whole packs.
template <typename T>
bool Vectorised(int64_t c, bool aligned) {
  return aligned && c % Pack<T>::kSize == 0;
}

cudaError_t Forward(const void* a, const void* b, void* sum, const float* gamma, const float* beta, float eps,
                    int64_t rows, int64_t c, void* y, float* mean, float* rstd, FloatType t, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* ps = static_cast<T*>(sum);
    T* py = static_cast<T*>(y);
    if (Vectorised<T>(c, Aligned16(a, b, sum, gamma, beta, y))) {
      layernorm::LayerNormForwardKernel<Pack<T>::kSize><<<BlocksFor(rows, kLnWarps), kLnThreads, 0, stream>>>(
          pa, pb, ps, gamma, beta, eps, rows, c, py, mean, rstd);
    } else {
      layernorm::LayerNormForwardKernel<1><<<BlocksFor(rows, kLnWarps), kLnThreads, 0, stream>>>(
          pa, pb, ps, gamma, beta, eps, rows, c, py, mean, rstd);
    }
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t LaunchLayerNormForward(const void* x, const float* gamma, const float* beta, float eps, int64_t rows,
                                   int64_t c, void* y, float* mean, float* rstd, FloatType t, cudaStream_t stream) {
  return Forward(x, nullptr, nullptr, gamma, beta, eps, rows, c, y, mean, rstd, t, stream);
}

cudaError_t LaunchAddLayerNormForward(const void* a, const void* b, const float* gamma, const float* beta,
                                      float eps, int64_t rows, int64_t c, void* sum, void* y, float* mean,
                                      float* rstd, FloatType t, cudaStream_t stream) {
  if (b == nullptr || sum == nullptr) return cudaErrorInvalidValue;
  return Forward(a, b, sum, gamma, beta, eps, rows, c, y, mean, rstd, t, stream);
}

cudaError_t LaunchLayerNormBackward(const void* x, const void* dy, const float* gamma, const float* mean,
                                    const float* rstd, const void* residual, int64_t rows, int64_t c, void* dx,
                                    float* dy_xhat, FloatType t, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    const T* px = static_cast<const T*>(x);
    const T* pdy = static_cast<const T*>(dy);
    const T* pr = static_cast<const T*>(residual);
    T* pdx = static_cast<T*>(dx);
    if (Vectorised<T>(c, Aligned16(x, dy, gamma, residual, dx, dy_xhat))) {
      layernorm::LayerNormBackwardKernel<Pack<T>::kSize><<<BlocksFor(rows, kLnWarps), kLnThreads, 0, stream>>>(
          px, pdy, gamma, mean, rstd, pr, rows, c, pdx, dy_xhat);
    } else {
      layernorm::LayerNormBackwardKernel<1><<<BlocksFor(rows, kLnWarps), kLnThreads, 0, stream>>>(
          px, pdy, gamma, mean, rstd, pr, rows, c, pdx, dy_xhat);
    }
    return cudaGetLastError();
  });
}

}  // namespace ringmaster::kernels
