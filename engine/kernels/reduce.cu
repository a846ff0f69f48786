// Reduction launchers (reduce.h); the kernels are in reduce_kernels.cuh.
#include "engine/kernels/kernel_util.cuh"
#include "engine/kernels/reduce.h"
// After kernel_util.cuh: the kernels use the CUDA built-ins it brings.
#include "engine/kernels/reduce_kernels.cuh"

namespace ringmaster::kernels {

using reduce::Chunks;

int64_t ColumnSumScratchFloats(int64_t rows, int64_t cols) { return Chunks(rows) * cols; }

cudaError_t LaunchColumnSum(const void* x, FloatType t, int64_t rows, int64_t cols, float* scratch, float* out,
                            bool accumulate, cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  const int64_t chunks = Chunks(rows);
  if (chunks > 65535) return cudaErrorInvalidValue;  // gridDim.y: more than 16.7M rows
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    if (chunks > 0) {
      dim3 grid(static_cast<unsigned>((cols + reduce::kTileCols - 1) / reduce::kTileCols),
                static_cast<unsigned>(chunks));
      reduce::ColumnPartialKernel<T><<<grid, dim3(reduce::kTileCols, reduce::kTileRows), 0, stream>>>(
          static_cast<const T*>(x), rows, cols, scratch);
    }
    reduce::ColumnFinishKernel<<<GridFor(cols), kThreads, 0, stream>>>(scratch, chunks, cols, out, accumulate);
    return cudaGetLastError();
  });
}

cudaError_t LaunchChannelSum(const void* x, FloatType t, int64_t n, int64_t c, int64_t hw, float* out,
                             cudaStream_t stream) {
  if (c <= 0) return cudaSuccess;
  return WithStorage(t, [&](auto zero) {
    using T = decltype(zero);
    reduce::ChannelSumKernel<T><<<static_cast<unsigned>(c), kThreads, 0, stream>>>(static_cast<const T*>(x), n, c,
                                                                                    hw, out);
    return cudaGetLastError();
  });
}

}  // namespace ringmaster::kernels
