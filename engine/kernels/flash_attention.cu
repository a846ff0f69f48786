// Flash attention's launchers; the kernels are in flash_attention_kernels.cuh.
#include "engine/kernels/flash_attention.h"
#include "engine/kernels/kernel_util.cuh"
// After kernel_util.cuh and flash_attention.h: the kernels use their CUDA
// built-ins and AttentionDims.
#include "engine/kernels/flash_attention_kernels.cuh"

namespace ringmaster::kernels {
namespace {

bool Empty(AttentionDims d) { return d.b * d.nh * d.t <= 0; }

}  // namespace

cudaError_t LaunchFlashAttentionForward(const void* qkv, FloatType t, AttentionDims d, float scale, void* out,
                                        float* lse, cudaStream_t stream) {
  if (!FlashAttentionSupports(d.hd)) return cudaErrorInvalidValue;
  if (Empty(d)) return cudaSuccess;
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    flash::FlashForwardKernel<T><<<flash::TileGrid(d), flash::kTileThreads, 0, stream>>>(
        static_cast<const T*>(qkv), d, scale, static_cast<T*>(out), lse);
    return cudaGetLastError();
  });
}

cudaError_t LaunchFlashAttentionBackward(const void* qkv, const void* out, const float* lse, const void* dout,
                                         FloatType t, AttentionDims d, float scale, float* dsum, void* dqkv,
                                         cudaStream_t stream) {
  if (!FlashAttentionSupports(d.hd)) return cudaErrorInvalidValue;
  if (Empty(d)) return cudaSuccess;
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    const T *q = static_cast<const T*>(qkv), *o = static_cast<const T*>(out), *g = static_cast<const T*>(dout);
    T* dq = static_cast<T*>(dqkv);
    flash::RowDotKernel<T>
        <<<GridFor(8 * d.b * d.nh * d.t, flash::kRowDotThreads), flash::kRowDotThreads, 0, stream>>>(o, g, d, dsum);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    flash::FlashBackwardKvKernel<T>
        <<<flash::TileGrid(d), flash::kTileThreads, 0, stream>>>(q, g, lse, dsum, d, scale, dq);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    flash::FlashBackwardQKernel<T>
        <<<flash::TileGrid(d), flash::kTileThreads, 0, stream>>>(q, g, lse, dsum, d, scale, dq);
    return cudaGetLastError();
  });
}

}  // namespace ringmaster::kernels
