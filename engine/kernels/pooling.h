#ifndef RINGMASTER_ENGINE_KERNELS_POOLING_H_
#define RINGMASTER_ENGINE_KERNELS_POOLING_H_

// Max pooling (k x k windows, stride s, no padding) on NCHW planes. Our own
// kernels rather than cuDNN's: the contract routes the gradient to the FIRST
// maximum of a window (ties are common after a ReLU), which cuDNN does not
// promise. x, y, dy, dx are activations in the storage type t (kF32, kF16 or
// kBF16). Launchers enqueue on `stream` and return the cudaError_t.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// x [planes, h, w] -> y [planes, oh, ow], oh = (h - k) / s + 1, ow likewise;
// y = the window's maximum (a stored value: exact).
cudaError_t LaunchMaxPoolForward(const void* x, FloatType t, int64_t planes, int64_t h, int64_t w, int64_t k,
                                 int64_t s, void* y, cudaStream_t stream);
// dx (overwritten) = sum of dy over the windows whose first maximum (rows,
// then columns) is that element, added in fp32 in window order and stored once.
cudaError_t LaunchMaxPoolBackward(const void* x, const void* dy, FloatType t, int64_t planes, int64_t h, int64_t w,
                                  int64_t k, int64_t s, void* dx, cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_POOLING_H_
