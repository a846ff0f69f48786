// Two-stage fp64 sums of squares over multi-tensor tables (grad_norm.h).
#include "engine/kernels/grad_norm.h"

#include <cuda_runtime.h>

#include "engine/kernels/optim_reduce.cuh"

namespace ringmaster::kernels {
namespace {

__global__ void ChunkSumSquaresKernel(MultiTensorTable table, NormField field, double* partials) {
  const ChunkRange r = BlockChunk(table);
  const float* x = field == NormField::kWeights ? r.e->w : r.e->g;
  double sum = 0.0;
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    const double xi = x[i];
    sum += xi * xi;
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block per entry: threads stride over its chunks, then a block sum.
__global__ void EntrySumsKernel(MultiTensorTable table, const double* partials, double* entry_sums) {
  const MultiTensorEntry& e = table.entries[blockIdx.x];
  double sum = 0.0;
  for (int c = threadIdx.x; c < e.num_chunks; c += blockDim.x) sum += partials[e.first_chunk + c];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) entry_sums[blockIdx.x] = sum;
}

__global__ void TotalSumKernel(const double* values, int n, double* out) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += values[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) *out = sum;
}

}  // namespace

int LaunchChunkSumSquares(const MultiTensorTable& table, NormField field, double* partials, void* stream) {
  if (table.num_chunks == 0) return static_cast<int>(cudaSuccess);
  ChunkSumSquaresKernel<<<table.num_chunks, kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(table, field,
                                                                                                   partials);
  return static_cast<int>(cudaGetLastError());
}

int LaunchEntrySums(const MultiTensorTable& table, const double* partials, double* entry_sums, void* stream) {
  if (table.num_entries == 0) return static_cast<int>(cudaSuccess);
  EntrySumsKernel<<<table.num_entries, kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(table, partials,
                                                                                              entry_sums);
  return static_cast<int>(cudaGetLastError());
}

int LaunchTotalSum(const double* values, int n, double* out, void* stream) {
  TotalSumKernel<<<1, 1024, 0, static_cast<cudaStream_t>(stream)>>>(values, n, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ringmaster::kernels
