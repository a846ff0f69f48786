// Sum-of-squares kernels of grad_norm.h (fp64, two-stage, deterministic).
//   ChunkSumSquaresKernel: one block of kOptimThreads per chunk of the table.
//   EntrySumsKernel: one block of kOptimThreads per entry.
//   TotalSumKernel: one block of kTotalSumThreads.
//
// Included by grad_norm.cu and by the host emulation tests; includes the
// optimizer's device helpers and plain C++ headers only (the includer
// provides the CUDA built-ins).
#ifndef RINGMASTER_ENGINE_KERNELS_GRAD_NORM_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_GRAD_NORM_KERNELS_CUH_

#include "engine/kernels/grad_norm.h"
#include "engine/kernels/optim_reduce.cuh"

namespace ringmaster::kernels::grad_norm {

constexpr int kTotalSumThreads = 1024;

__global__ void __launch_bounds__(kOptimThreads)
    ChunkSumSquaresKernel(MultiTensorTable table, NormField field, double* partials) {
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

// Threads stride over the entry's chunks, then a block sum.
__global__ void __launch_bounds__(kOptimThreads)
    EntrySumsKernel(MultiTensorTable table, const double* partials, double* entry_sums) {
  const MultiTensorEntry& e = table.entries[blockIdx.x];
  double sum = 0.0;
  for (int c = threadIdx.x; c < e.num_chunks; c += blockDim.x) sum += partials[e.first_chunk + c];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) entry_sums[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(kTotalSumThreads) TotalSumKernel(const double* values, int n, double* out) {
  double sum = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += values[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) *out = sum;
}

}  // namespace ringmaster::kernels::grad_norm

#endif  // RINGMASTER_ENGINE_KERNELS_GRAD_NORM_KERNELS_CUH_
