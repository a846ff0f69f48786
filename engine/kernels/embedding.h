#ifndef RINGMASTER_ENGINE_KERNELS_EMBEDDING_H_
#define RINGMASTER_ENGINE_KERNELS_EMBEDDING_H_

// Token + position embedding, forward and backward (fp32 accumulation, no
// atomics: every output element is summed by one thread in token order, so
// the gradients are deterministic and match the CPU's order).

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// out[b, t, :] = round(round(wte[tokens[b, t], :]) + round(wpe[t, :])).
// tokens i32 [b, t] in [0, v) (a token outside traps: a caller bug).
cudaError_t LaunchEmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int64_t b, int64_t t,
                                   int64_t v, int64_t c, float* out, FloatType round, cudaStream_t stream);
// dwte[tokens[i], :] += dout[i, :]; dwpe[t, :] += sum_b dout[b, t, :].
cudaError_t LaunchEmbeddingBackward(const int32_t* tokens, const float* dout, int64_t b, int64_t t, int64_t v,
                                    int64_t c, float* dwte, float* dwpe, cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_EMBEDDING_H_
