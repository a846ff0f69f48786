// Flash attention's launchers; the kernels are in flash_attention_kernels.cuh.
#include "engine/kernels/flash_attention.h"
#include "engine/kernels/kernel_util.cuh"
// After kernel_util.cuh: the kernels use its RoundTo.
#include "engine/kernels/flash_attention_kernels.cuh"

namespace ringmaster::kernels {
namespace {

using flash::kKvRows;
using flash::kQRows;

dim3 TileGrid(AttentionDims d, int rows) {
  return dim3(static_cast<unsigned>(d.b * d.nh), static_cast<unsigned>((d.t + rows - 1) / rows));
}

bool Empty(AttentionDims d) { return d.b * d.nh * d.t <= 0; }

}  // namespace

cudaError_t LaunchFlashAttentionForward(const float* qkv, AttentionDims d, float scale, float* out, float* lse,
                                        FloatType round, cudaStream_t stream) {
  if (!FlashAttentionSupports(d.hd)) return cudaErrorInvalidValue;
  if (Empty(d)) return cudaSuccess;
  flash::FlashForwardKernel<<<TileGrid(d, kQRows), kQRows, 0, stream>>>(qkv, d, scale, out, lse, round);
  return cudaGetLastError();
}

cudaError_t LaunchFlashAttentionBackward(const float* qkv, const float* out, const float* lse, const float* dout,
                                         AttentionDims d, float scale, float* dsum, float* dqkv, FloatType round,
                                         cudaStream_t stream) {
  if (!FlashAttentionSupports(d.hd)) return cudaErrorInvalidValue;
  if (Empty(d)) return cudaSuccess;
  flash::RowDotKernel<<<GridFor(d.b * d.nh * d.t), kThreads, 0, stream>>>(out, dout, d, dsum);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  flash::FlashBackwardKvKernel<<<TileGrid(d, kKvRows), kKvRows, 0, stream>>>(qkv, dout, lse, dsum, d, scale, dqkv, round);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  flash::FlashBackwardQKernel<<<TileGrid(d, kQRows), kQRows, 0, stream>>>(qkv, dout, lse, dsum, d, scale, dqkv, round);
  return cudaGetLastError();
}

}  // namespace ringmaster::kernels
