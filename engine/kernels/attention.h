#ifndef RINGMASTER_ENGINE_KERNELS_ATTENTION_H_
#define RINGMASTER_ENGINE_KERNELS_ATTENTION_H_

// The non-GEMM parts of causal self-attention on the unfused path (head
// sizes the flash kernels do not take; the backend runs the GEMMs through
// cuBLASLt between them): head (un)packing of GPT-2's fused qkv layout and
// the fused causal softmax, forward and backward. Layouts: qkv/dqkv
// [b, t, 3, nh, hd]; q, k, v and their gradients [b, nh, t, hd]; out
// [b, t, nh * hd]: activations in the storage type t (kF32, kF16 or kBF16),
// moved without arithmetic. Scores and probabilities att/datt
// [b * nh, t, t] stay f32, rounded to `round` as the CPU twin rounds its
// probabilities and their gradients. Launchers enqueue on `stream` and
// return the cudaError_t.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

struct AttentionDims {
  int64_t b, t, nh, hd;
};

// Heads first: src [b, t, parts, nh, hd] -> dst0 (and dst1, dst2 when parts
// is 3) [b, nh, t, hd]. parts = 3 splits the fused qkv; parts = 1 transposes
// one [b, t, nh * hd] tensor (dout) and leaves dst1/dst2 unused.
cudaError_t LaunchSplitHeads(const void* src, FloatType t, AttentionDims d, int parts, void* dst0, void* dst1,
                             void* dst2, cudaStream_t stream);
// dqkv [b, t, 3, nh, hd] = dq, dk, dv [b, nh, t, hd] interleaved back.
cudaError_t LaunchMergeQkvGrads(const void* dq, const void* dk, const void* dv, FloatType t, AttentionDims d,
                                void* dqkv, cudaStream_t stream);
// out [b, t, nh * hd] = y [b, nh, t, hd] with the heads merged.
cudaError_t LaunchMergeHeads(const void* y, FloatType t, AttentionDims d, void* out, cudaStream_t stream);
// In place on att [b * nh, t, t] holding scaled scores: row i becomes
// round(softmax(row[0..i])), zeros above the diagonal. One warp per row.
cudaError_t LaunchCausalSoftmax(float* att, AttentionDims d, FloatType round, cudaStream_t stream);
// In place on datt [b * nh, t, t] holding dL/datt: becomes
// round(scale * att * (datt - sum_j att * datt)), zeros above the diagonal.
cudaError_t LaunchCausalSoftmaxBackward(const float* att, float* datt, AttentionDims d, float scale,
                                        FloatType round, cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_ATTENTION_H_
