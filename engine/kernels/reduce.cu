// Column and channel sums, then their launchers.
#include "engine/kernels/kernel_util.cuh"
#include "engine/kernels/reduce.h"

namespace ringmaster::kernels {
namespace {

constexpr int kTileCols = 32;
constexpr int kTileRows = 8;
constexpr int64_t kChunkRows = 256;  // rows per partial sum: fixed, so the order is too

// partial[chunk, j] = sum of x[i, j] over the chunk's rows. Block (32, 8).
__global__ void ColumnPartialKernel(const float* x, int64_t rows, int64_t cols, float* partial) {
  __shared__ float tile[kTileRows][kTileCols + 1];
  const int64_t j = blockIdx.x * int64_t{kTileCols} + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * kChunkRows;
  const int64_t r1 = min(rows, r0 + kChunkRows);
  float s = 0.0f;
  if (j < cols) {
    for (int64_t i = r0 + threadIdx.y; i < r1; i += kTileRows) s += x[i * cols + j];
  }
  tile[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    float t = 0.0f;
    for (int k = 0; k < kTileRows; ++k) t += tile[k][threadIdx.x];
    partial[chunk * cols + j] = t;
  }
}

__global__ void ColumnFinishKernel(const float* partial, int64_t chunks, int64_t cols, float* out, bool accumulate,
                                   FloatType round) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= cols) return;
  float s = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) s += partial[c * cols + j];
  s = RoundTo(round, s);
  out[j] = accumulate ? out[j] + s : s;
}

// One block per channel.
__global__ void ChannelSumKernel(const float* x, int64_t n, int64_t c, int64_t hw, float* out, FloatType round) {
  __shared__ float scratch[32];
  const int64_t ch = blockIdx.x;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n * hw; i += blockDim.x) {
    const int64_t b = i / hw, p = i % hw;
    s += x[(b * c + ch) * hw + p];
  }
  s = BlockSum(s, scratch);
  if (threadIdx.x == 0) out[ch] += RoundTo(round, s);
}

int64_t Chunks(int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }

}  // namespace

int64_t ColumnSumScratchFloats(int64_t rows, int64_t cols) { return Chunks(rows) * cols; }

cudaError_t LaunchColumnSum(const float* x, int64_t rows, int64_t cols, float* scratch, float* out, bool accumulate,
                            FloatType round, cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  const int64_t chunks = Chunks(rows);
  if (chunks > 65535) return cudaErrorInvalidValue;  // gridDim.y: more than 16.7M rows
  if (chunks > 0) {
    dim3 grid(static_cast<unsigned>((cols + kTileCols - 1) / kTileCols), static_cast<unsigned>(chunks));
    ColumnPartialKernel<<<grid, dim3(kTileCols, kTileRows), 0, stream>>>(x, rows, cols, scratch);
  }
  ColumnFinishKernel<<<GridFor(cols), kThreads, 0, stream>>>(scratch, chunks, cols, out, accumulate, round);
  return cudaGetLastError();
}

cudaError_t LaunchChannelSum(const float* x, int64_t n, int64_t c, int64_t hw, float* out, FloatType round,
                             cudaStream_t stream) {
  if (c <= 0) return cudaSuccess;
  ChannelSumKernel<<<static_cast<unsigned>(c), kThreads, 0, stream>>>(x, n, c, hw, out, round);
  return cudaGetLastError();
}

}  // namespace ringmaster::kernels
