// Fused multi-tensor optimizer launchers (optim_update.h); the kernels are in
// optim_update_kernels.cuh.
#include "engine/kernels/optim_update.h"

#include <cuda_runtime.h>

#include "engine/kernels/grad_norm.h"
#include "engine/kernels/optim_update_kernels.cuh"

namespace ringmaster::kernels {
namespace {

using namespace optim_update;  // NOLINT: the kernels of this file

cudaStream_t Stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Per-entry sums of w^2 into scratch.w_sums.
int WeightSums(const MultiTensorTable& table, const OptimScratch& scratch, void* stream) {
  int err = LaunchChunkSumSquares(table, NormField::kWeights, scratch.partials, stream);
  if (err != 0) return err;
  return LaunchEntrySums(table, scratch.partials, scratch.w_sums, stream);
}

}  // namespace

int LaunchSgdUpdate(const MultiTensorTable& table, const SgdHyper& hyper, const DeviceStepControl* control,
                    void* stream) {
  if (table.num_chunks == 0) return static_cast<int>(cudaSuccess);
  SgdKernel<<<table.num_chunks, kOptimThreads, 0, Stream(stream)>>>(table, hyper, control);
  return static_cast<int>(cudaGetLastError());
}

int LaunchAdamWUpdate(const MultiTensorTable& table, const AdamHyper& hyper, const DeviceStepControl* control,
                      void* stream) {
  if (table.num_chunks == 0) return static_cast<int>(cudaSuccess);
  AdamWKernel<<<table.num_chunks, kOptimThreads, 0, Stream(stream)>>>(table, MakeAdamConstants(hyper), control);
  return static_cast<int>(cudaGetLastError());
}

int LaunchLarsUpdate(const MultiTensorTable& table, const LarsHyper& hyper, const DeviceStepControl* control,
                     const OptimScratch& scratch, void* stream) {
  if (table.num_chunks == 0) return static_cast<int>(cudaSuccess);
  int err = WeightSums(table, scratch, stream);
  if (err == 0) err = LaunchChunkSumSquares(table, NormField::kGrads, scratch.partials, stream);
  if (err == 0) err = LaunchEntrySums(table, scratch.partials, scratch.u_sums, stream);
  if (err != 0) return err;
  LarsKernel<<<table.num_chunks, kOptimThreads, 0, Stream(stream)>>>(table, hyper, control, scratch.w_sums,
                                                                      scratch.u_sums);
  return static_cast<int>(cudaGetLastError());
}

int LaunchLambUpdate(const MultiTensorTable& table, const AdamHyper& hyper, const DeviceStepControl* control,
                     const OptimScratch& scratch, void* stream) {
  if (table.num_chunks == 0) return static_cast<int>(cudaSuccess);
  const AdamConstants c = MakeAdamConstants(hyper);
  int err = WeightSums(table, scratch, stream);
  if (err != 0) return err;
  LambSumSquaresKernel<<<table.num_chunks, kOptimThreads, 0, Stream(stream)>>>(table, c, control, scratch.partials);
  err = static_cast<int>(cudaGetLastError());
  if (err == 0) err = LaunchEntrySums(table, scratch.partials, scratch.u_sums, stream);
  if (err != 0) return err;
  LambKernel<<<table.num_chunks, kOptimThreads, 0, Stream(stream)>>>(table, c, control, scratch.w_sums,
                                                                      scratch.u_sums);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ringmaster::kernels
