#ifndef RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_H_
#define RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_H_

// Fused softmax cross-entropy, chunk by chunk: a classifier computes the
// logits of a chunk of rows, adds that chunk's loss and overwrites the logits
// with their gradient, then moves to the next chunk (the logits of the whole
// batch never exist at once). One block per row reads the row once with an
// online max/sum and then writes that row's dlogits; the loss is reduced in a
// fixed order (deterministic). Logits and dlogits are in the storage type t
// (kF32, kF16 or kBF16); the math, the loss and `count` are fp32. Launchers
// enqueue on `stream` and return the cudaError_t.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// Floats of device scratch LaunchSoftmaxCrossEntropy needs for m rows.
int64_t SoftmaxCrossEntropyScratchFloats(int64_t m);

// count[0] = number of targets[0..m) that are not ignore_index (exact below
// 2^24, deterministic). Called once over the whole batch, before its chunks.
cudaError_t LaunchCountTargets(const int32_t* targets, int64_t m, int32_t ignore_index, float* count,
                               cudaStream_t stream);

// logits [m, ld] (only the first v <= ld columns are real: a 16-byte pack
// that straddles v may load padding, masked out of every sum, so it never
// reaches the loss or the gradient), targets i32 [m]. Rows whose target is
// ignore_index do not count. loss[0] += (sum over this call's counted rows of
// -log softmax(row[0..v))[target]) / count[0] (adds 0 when count[0] == 0),
// added by one thread. dlogits [m, ld] (or nullptr: loss only; it may be the
// same pointer as logits, each row being read completely before it is
// overwritten) = grad_scale * (softmax - onehot) / count[0] for j < v,
// exactly 0 for v <= j < ld and on ignored rows. A target outside [0, v) that
// is not ignore_index is a caller bug: the kernel traps (the stream's next
// synchronisation reports an error). scratch: SoftmaxCrossEntropyScratchFloats(m).
cudaError_t LaunchSoftmaxCrossEntropy(const void* logits, FloatType t, int64_t m, int64_t v, int64_t ld,
                                      const int32_t* targets, int32_t ignore_index, const float* count,
                                      float grad_scale, float* scratch, float* loss, void* dlogits,
                                      cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_H_
