#ifndef RINGMASTER_ENGINE_KERNELS_GRAD_NORM_H_
#define RINGMASTER_ENGINE_KERNELS_GRAD_NORM_H_

// Sums of squares over a multi-tensor table, in fp64, two-stage and
// deterministic (see optim_multi_tensor.h): the global gradient norm for
// clipping, and the per-parameter norms of LARS and LAMB.
//
// Plain C++ header; launchers return the cudaError_t of the launch as int.
// Every pointer is device memory; work is enqueued on `stream` (a cudaStream_t).

#include <cstdint>

#include "engine/kernels/optim_multi_tensor.h"

namespace ringmaster::kernels {

enum class NormField : int32_t { kWeights = 0, kGrads = 1 };

// Stage 1: partials[c] = sum of x^2 over chunk c (x = w or g as stored).
// partials: table.num_chunks doubles.
int LaunchChunkSumSquares(const MultiTensorTable& table, NormField field, double* partials, void* stream);

// Stage 2 per entry: entry_sums[e] = sum of partials over entry e's chunks, in
// chunk order (0 for an entry without chunks). entry_sums: table.num_entries doubles.
int LaunchEntrySums(const MultiTensorTable& table, const double* partials, double* entry_sums, void* stream);

// Stage 2 overall: *out = sum of values[0..n) (a fixed tree; 0 when n == 0).
int LaunchTotalSum(const double* values, int n, double* out, void* stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_GRAD_NORM_H_
