#ifndef RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_H_
#define RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_H_

// Flash-style causal self-attention on GPT-2's fused qkv layout: key/value
// tiles stream through shared memory with an online softmax, so the [t, t]
// probability matrix never exists; forward saves the per-row logsumexp and
// backward recomputes the probabilities from it (FlashAttention-2). Its CPU
// twin is engine/core/flash_attention_reference.cc (same tiles).
// fp32 storage and CUDA-core fp32 arithmetic; outputs are rounded to the
// compute dtype (as the CPU backend rounds its GEMM outputs). Deterministic:
// no atomics (dK/dV per key block, dQ in a second pass per query block).
// Layouts: qkv/dqkv [b, t, 3, nh, hd]; out/dout [b, t, nh, hd]; lse and dsum
// [b, nh, t].

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/attention.h"
#include "engine/kernels/flash_limits.h"
#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// out = round(softmax(scale * q k^T, causal) v), lse[i] = log sum_{j <= i} exp(scale * q_i . k_j).
cudaError_t LaunchFlashAttentionForward(const float* qkv, AttentionDims d, float scale, float* out, float* lse,
                                        FloatType round, cudaStream_t stream);
// dqkv (overwritten) from forward's out and lse; dsum [b, nh, t] is scratch
// (it receives D_i = dout_i . out_i).
cudaError_t LaunchFlashAttentionBackward(const float* qkv, const float* out, const float* lse, const float* dout,
                                         AttentionDims d, float scale, float* dsum, float* dqkv, FloatType round,
                                         cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_FLASH_ATTENTION_H_
