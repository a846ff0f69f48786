// Softmax cross-entropy launchers (softmax_ce.h); the kernels are in softmax_ce_kernels.cuh.
#include "engine/kernels/kernel_util.cuh"
#include "engine/kernels/softmax_ce.h"
// After kernel_util.cuh: the kernels use the CUDA built-ins it brings.
#include "engine/kernels/softmax_ce_kernels.cuh"

namespace ringmaster::kernels {

using softmax_ce::kCeReduceThreads;
using softmax_ce::kCeThreads;

int64_t SoftmaxCrossEntropyScratchFloats(int64_t m) { return m > 0 ? m : 1; }

cudaError_t LaunchCountTargets(const int32_t* targets, int64_t m, int32_t ignore_index, float* count,
                               cudaStream_t stream) {
  softmax_ce::CountTargetsKernel<<<1, kCeReduceThreads, 0, stream>>>(targets, m, ignore_index, count);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(const void* logits, FloatType t, int64_t m, int64_t v, int64_t ld,
                                      const int32_t* targets, int32_t ignore_index, const float* count,
                                      float grad_scale, float* scratch, float* loss, void* dlogits,
                                      cudaStream_t stream) {
  if (m <= 0) return cudaSuccess;
  if (v <= 0 || ld < v) return cudaErrorInvalidValue;
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    constexpr int kPack = Pack<T>::kSize;
    const T* z = static_cast<const T*>(logits);
    T* d = static_cast<T*>(dlogits);
    const unsigned rows = static_cast<unsigned>(m);
    if (ld % kPack == 0 && Aligned16(logits, dlogits)) {
      softmax_ce::SoftmaxCrossEntropyRowKernel<kPack><<<rows, kCeThreads, 0, stream>>>(
          z, v, ld, targets, ignore_index, count, grad_scale, scratch, d);
    } else {
      softmax_ce::SoftmaxCrossEntropyRowKernel<1><<<rows, kCeThreads, 0, stream>>>(z, v, ld, targets, ignore_index,
                                                                                   count, grad_scale, scratch, d);
    }
    softmax_ce::CeLossKernel<<<1, kCeReduceThreads, 0, stream>>>(scratch, m, count, loss);
    return cudaGetLastError();
  });
}

}  // namespace ringmaster::kernels
