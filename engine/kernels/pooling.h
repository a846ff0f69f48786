#ifndef RINGMASTER_ENGINE_KERNELS_POOLING_H_
#define RINGMASTER_ENGINE_KERNELS_POOLING_H_

// Max pooling (k x k windows, stride s, no padding) on NCHW planes. Our own
// kernels rather than cuDNN's: the contract routes the gradient to the FIRST
// maximum of a window (ties are common after a ReLU), which cuDNN does not
// promise.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// x [planes, h, w] -> y [planes, oh, ow], oh = (h - k) / s + 1.
cudaError_t LaunchMaxPoolForward(const float* x, int64_t planes, int64_t h, int64_t w, int64_t k, int64_t s,
                                 float* y, cudaStream_t stream);
// dx (overwritten) = sum over windows whose first maximum is that element of
// dy, added in window order; rounded when windows overlap (s < k).
cudaError_t LaunchMaxPoolBackward(const float* x, const float* dy, int64_t planes, int64_t h, int64_t w, int64_t k,
                                  int64_t s, float* dx, FloatType round, cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_POOLING_H_
