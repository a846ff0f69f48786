#ifndef RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_H_
#define RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_H_

// Fused softmax cross-entropy: one block per row reads the logits once with an
// online max/sum, then writes that row's dlogits; no probability matrix is
// stored beyond dlogits. The loss is reduced in a fixed order (deterministic).

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// Floats of device scratch LaunchSoftmaxCrossEntropy needs for m rows.
int64_t SoftmaxCrossEntropyScratchFloats(int64_t m);
// logits [m, v], targets i32 [m]. Rows whose target is ignore_index do not
// count; count = number of counted rows. loss[0] = mean over counted rows of
// -log softmax[target] (0 when count = 0); dlogits = round(grad_scale *
// (softmax - onehot) / count), zero on ignored rows. A target outside [0, v)
// that is not ignore_index is a caller bug: the kernel traps (the stream's
// next synchronisation reports an error).
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* targets, int64_t m, int64_t v,
                                      int32_t ignore_index, float grad_scale, float* scratch, float* loss,
                                      float* dlogits, FloatType round, cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_H_
