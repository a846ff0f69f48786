#ifndef RINGMASTER_ENGINE_KERNELS_REDUCE_H_
#define RINGMASTER_ENGINE_KERNELS_REDUCE_H_

// Deterministic reductions (fixed partition and order, no atomics): column sums
// of a row-major matrix (bias gradients, LayerNorm's dgamma/dbeta) and
// per-channel sums of an NCHW tensor (convolution bias gradients). The input
// is in the storage type t (kF32, kF16 or kBF16, or f32 scratch such as
// LayerNorm's dy_xhat with kF32); sums are fp32 and NOT rounded: parameter
// gradients accumulate in fp32 on the device (the CPU backend rounds each
// contribution to its compute dtype, which stays within the tolerance of the
// comparison). Launchers enqueue on `stream` and return the cudaError_t.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// Floats of device scratch LaunchColumnSum needs for a [rows, cols] input.
int64_t ColumnSumScratchFloats(int64_t rows, int64_t cols);
// out[j] (+)= sum_i x[i, j] for x [rows, cols]; `accumulate` adds to out,
// otherwise overwrites it. scratch: ColumnSumScratchFloats floats.
// rows <= 16,776,960 (cudaErrorInvalidValue beyond).
cudaError_t LaunchColumnSum(const void* x, FloatType t, int64_t rows, int64_t cols, float* scratch, float* out,
                            bool accumulate, cudaStream_t stream);
// out[ch] += sum over n and hw of x[n, ch, hw] for x [n, c, hw].
cudaError_t LaunchChannelSum(const void* x, FloatType t, int64_t n, int64_t c, int64_t hw, float* out,
                             cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_REDUCE_H_
