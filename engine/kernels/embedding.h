#ifndef RINGMASTER_ENGINE_KERNELS_EMBEDDING_H_
#define RINGMASTER_ENGINE_KERNELS_EMBEDDING_H_

// Token + position embedding, forward and backward. tokens i32 [b, t] in
// [0, v) (a token outside traps: a caller bug); wte [v, c] and wpe [>= t, c]
// are f32 parameters, dwte and dwpe their f32 gradients (+=); out and dout
// [b, t, c] are activations in a storage type (kF32, kF16 or kBF16).
//
// The backward is deterministic and uses no float atomics: the token
// positions are sorted by token id (our stable LSD radix sort, 8 bits a pass:
// two passes for v <= 65,536), and every element
// of dwte is summed by one thread in position order, starting from its
// current value, as the CPU backend does (bitwise the CPU's). A token that
// occurs more than kDirectRun = 256 times in the batch (embedding_kernels.cuh)
// is summed in fixed pieces of 64 positions that are then added in order:
// still deterministic, within rounding of the CPU's sequence.
// dwpe[t, :] starts from its value and adds dout[0, t, :], dout[1, t, :], ...
// in order (bitwise the CPU's). Launchers enqueue on `stream` and return the
// cudaError_t (cudaErrorInvalidValue for another storage type).

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// out[b, t, :] = round(round(wte[tokens[b, t], :]) + round(wpe[t, :])), each
// round to out_type (the CPU twin rounds its operands, then the sum).
cudaError_t LaunchEmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int64_t b, int64_t t,
                                   int64_t v, int64_t c, void* out, FloatType out_type, cudaStream_t stream);

// Floats of device scratch LaunchEmbeddingBackward needs for b * t = bt
// tokens with rows of c (the sort's buffers and the long runs' partial sums,
// held as 4-byte words): about 4 * bt + 2 * c * bt / 64, 1.8 M floats for
// GPT-2's 65,536 tokens of 768.
int64_t EmbeddingBackwardScratchFloats(int64_t bt, int64_t c);

// dwte[tokens[i], :] += dout[i, :]; dwpe[t, :] += sum_b dout[b, t, :].
// scratch: EmbeddingBackwardScratchFloats(b * t, c) floats of device memory,
// 16-byte aligned (cudaErrorInvalidValue otherwise).
cudaError_t LaunchEmbeddingBackward(const int32_t* tokens, const void* dout, FloatType dout_type, int64_t b,
                                    int64_t t, int64_t v, int64_t c, float* dwte, float* dwpe, float* scratch,
                                    cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_EMBEDDING_H_
