// Reduction kernels (reduce.h).
//   ColumnPartialKernel: grid (ceil(cols / kTileCols), ceil(rows / kChunkRows)),
//     block (kTileCols, kTileRows); partial[chunk, j] = sum of the chunk's rows
//     of column j (each thread a strided eighth of them, then the eight in order).
//   ColumnFinishKernel: kThreads threads, any grid; out[j] (+)= the chunks'
//     partials of column j in chunk order.
//   ChannelSumKernel: one block of kThreads per channel; a block sum.
// The partition and the order depend only on the shape: deterministic.
//
// Included by reduce.cu and by the host emulation tests; includes only
// device_util.cuh (the includer provides the CUDA built-ins).
#ifndef RINGMASTER_ENGINE_KERNELS_REDUCE_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_REDUCE_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::reduce {

constexpr int kTileCols = 32;
constexpr int kTileRows = 8;
constexpr int64_t kChunkRows = 256;  // rows per partial sum: fixed, so the order is too

inline int64_t Chunks(int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }

template <typename T>
__global__ void __launch_bounds__(kTileCols* kTileRows)
    ColumnPartialKernel(const T* x, int64_t rows, int64_t cols, float* partial) {
  __shared__ float tile[kTileRows][kTileCols + 1];
  const int64_t j = blockIdx.x * int64_t{kTileCols} + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * kChunkRows;
  const int64_t r1 = rows < r0 + kChunkRows ? rows : r0 + kChunkRows;
  float s = 0.0f;
  if (j < cols) {
    for (int64_t i = r0 + threadIdx.y; i < r1; i += kTileRows) s += ToFloat(x[i * cols + j]);
  }
  tile[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    float t = 0.0f;
    for (int k = 0; k < kTileRows; ++k) t += tile[k][threadIdx.x];
    partial[chunk * cols + j] = t;
  }
}

__global__ void __launch_bounds__(kThreads)
    ColumnFinishKernel(const float* partial, int64_t chunks, int64_t cols, float* out, bool accumulate) {
  for (int64_t j = GlobalThread(); j < cols; j += GlobalStride()) {
    float s = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * cols + j];
    out[j] = accumulate ? out[j] + s : s;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) ChannelSumKernel(const T* x, int64_t n, int64_t c, int64_t hw,
                                                              float* out) {
  __shared__ float scratch[32];
  const int64_t ch = blockIdx.x;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n * hw; i += blockDim.x) {
    const int64_t b = i / hw, p = i % hw;
    s += ToFloat(x[(b * c + ch) * hw + p]);
  }
  s = BlockSum(s, scratch);
  if (threadIdx.x == 0) out[ch] += s;
}

}  // namespace ringmaster::kernels::reduce

#endif  // RINGMASTER_ENGINE_KERNELS_REDUCE_KERNELS_CUH_
