// Max pooling launchers (pooling.h); the kernels are in pooling_kernels.cuh.
#include "engine/kernels/kernel_util.cuh"
#include "engine/kernels/pooling.h"
// After kernel_util.cuh: the kernels use the CUDA built-ins it brings.
#include "engine/kernels/pooling_kernels.cuh"

namespace ringmaster::kernels {

cudaError_t LaunchMaxPoolForward(const void* x, FloatType t, int64_t planes, int64_t h, int64_t w, int64_t k,
                                 int64_t s, void* y, cudaStream_t stream) {
  if (k < 1 || s < 1) return cudaErrorInvalidValue;
  const int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
  if (h < k || w < k || planes <= 0) return cudaSuccess;
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    pooling::MaxPoolForwardKernel<T><<<GridFor(planes * oh * ow), kThreads, 0, stream>>>(
        static_cast<const T*>(x), planes, h, w, k, s, oh, ow, static_cast<T*>(y));
    return cudaGetLastError();
  });
}

cudaError_t LaunchMaxPoolBackward(const void* x, const void* dy, FloatType t, int64_t planes, int64_t h, int64_t w,
                                  int64_t k, int64_t s, void* dx, cudaStream_t stream) {
  if (k < 1 || s < 1) return cudaErrorInvalidValue;
  const int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
  if (h < k || w < k || planes <= 0) return cudaSuccess;
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    pooling::MaxPoolBackwardKernel<T><<<GridFor(planes * h * w), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), planes, h, w, k, s, oh, ow, static_cast<T*>(dx));
    return cudaGetLastError();
  });
}

}  // namespace ringmaster::kernels
