#ifndef RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_H_
#define RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_H_

// Flash-style causal self-attention on GPT-2's fused qkv layout
// (FlashAttention-2): key/value tiles stream through shared memory with an
// online softmax, so the [t, t] probability matrix never exists; forward
// saves the per-row logsumexp and backward recomputes the probabilities from
// it. fp32 arithmetic on CUDA cores for head sizes up to kFlashMaxHeadSize;
// the backend's fp32 path and its fallback where cuDNN has no engine for a
// 16-bit shape. Its CPU twin is engine/core/flash_attention_reference.cc
// (same tiles).
// Storage: qkv, out, dout and dqkv in `t` (kF32, kF16 or kBF16), every stored
// value rounded once to nearest even; lse and dsum f32. Deterministic: no
// atomics (dK/dV per key block, dQ in a second pass per query block).
// Layouts: qkv/dqkv [b, t, 3, nh, hd]; out/dout [b, t, nh, hd]; lse and dsum
// [b, nh, t]. Launchers enqueue on `stream` and return the cudaError_t
// (cudaErrorInvalidValue for a head size the kernels do not take).

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/attention.h"
#include "engine/kernels/flash_limits.h"
#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// out = softmax(scale * q k^T, causal) v, lse[i] = log sum_{j <= i} exp(scale * q_i . k_j).
cudaError_t LaunchFlashAttentionForward(const void* qkv, FloatType t, AttentionDims d, float scale, void* out,
                                        float* lse, cudaStream_t stream);
// dqkv (every element overwritten) from forward's out and lse; dsum
// [b, nh, t] is scratch (it receives D_i = dout_i . out_i).
cudaError_t LaunchFlashAttentionBackward(const void* qkv, const void* out, const float* lse, const void* dout,
                                         FloatType t, AttentionDims d, float scale, float* dsum, void* dqkv,
                                         cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_H_
