// Embedding launchers (embedding.h); the kernels (the backward's radix sort
// included) and the backward's launch sequence are in embedding_kernels.cuh.
#include "engine/kernels/embedding.h"
#include "engine/kernels/kernel_util.cuh"
// After kernel_util.cuh: the kernels use the CUDA built-ins it brings.
#include "engine/kernels/embedding_kernels.cuh"

namespace ringmaster::kernels {

cudaError_t LaunchEmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int64_t b, int64_t t,
                                   int64_t v, int64_t c, void* out, FloatType out_type, cudaStream_t stream) {
  const int64_t bt = b * t;
  if (bt * c <= 0) return cudaSuccess;
  return WithStorage(out_type, [&](auto zero) {
    using T = decltype(zero);
    constexpr int kPack = Pack<T>::kSize;
    T* o = static_cast<T*>(out);
    if (c % kPack == 0 && Aligned16(wte, wpe, out)) {
      embedding::EmbeddingForwardKernel<kPack><<<GridFor(bt * c / kPack), kThreads, 0, stream>>>(tokens, wte, wpe,
                                                                                                bt, t, v, c, o);
    } else {
      embedding::EmbeddingForwardKernel<1><<<GridFor(bt * c), kThreads, 0, stream>>>(tokens, wte, wpe, bt, t, v, c,
                                                                                       o);
    }
    return cudaGetLastError();
  });
}

int64_t EmbeddingBackwardScratchFloats(int64_t bt, int64_t c) {
  return embedding::BackwardLayout(bt, c, nullptr).floats;
}

cudaError_t LaunchEmbeddingBackward(const int32_t* tokens, const void* dout, FloatType dout_type, int64_t b,
                                    int64_t t, int64_t v, int64_t c, float* dwte, float* dwpe, float* scratch,
                                    cudaStream_t stream) {
  const int64_t bt = b * t;
  if (bt * c <= 0) return cudaSuccess;
  if (bt > INT32_MAX || v <= 0 || v > INT32_MAX || !Aligned16(scratch)) return cudaErrorInvalidValue;
  cudaError_t err = cudaSuccess;
  auto launch = [&](auto kernel, dim3 grid, dim3 block, auto... args) {
    kernel<<<grid, block, 0, stream>>>(args...);
    err = cudaGetLastError();
    return err == cudaSuccess;
  };
  return WithStorage(dout_type, [&](auto zero) {
    using T = decltype(zero);
    constexpr int kPack = Pack<T>::kSize;
    const T* g = static_cast<const T*>(dout);
    if (c % kPack == 0 && Aligned16(dout, dwte, dwpe)) {
      embedding::RunBackward<kPack>(launch, tokens, g, b, t, v, c, dwte, dwpe, scratch);
    } else {
      embedding::RunBackward<1>(launch, tokens, g, b, t, v, c, dwte, dwpe, scratch);
    }
    return err;
  });
}

}  // namespace ringmaster::kernels
