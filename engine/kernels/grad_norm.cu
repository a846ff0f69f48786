// Launchers of grad_norm.h; the kernels are in grad_norm_kernels.cuh.
#include "engine/kernels/grad_norm.h"

#include <cuda_runtime.h>

#include "engine/kernels/grad_norm_kernels.cuh"

namespace ringmaster::kernels {

int LaunchChunkSumSquares(const MultiTensorTable& table, NormField field, double* partials, void* stream) {
  if (table.num_chunks == 0) return static_cast<int>(cudaSuccess);
  grad_norm::ChunkSumSquaresKernel<<<table.num_chunks, kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      table, field, partials);
  return static_cast<int>(cudaGetLastError());
}

int LaunchEntrySums(const MultiTensorTable& table, const double* partials, double* entry_sums, void* stream) {
  if (table.num_entries == 0) return static_cast<int>(cudaSuccess);
  grad_norm::EntrySumsKernel<<<table.num_entries, kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      table, partials, entry_sums);
  return static_cast<int>(cudaGetLastError());
}

int LaunchTotalSum(const double* values, int n, double* out, void* stream) {
  grad_norm::TotalSumKernel<<<1, grad_norm::kTotalSumThreads, 0, static_cast<cudaStream_t>(stream)>>>(values, n,
                                                                                                     out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ringmaster::kernels
