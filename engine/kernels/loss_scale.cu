// The loss scaler's launchers (loss_scale.h); the kernels are in loss_scale_kernels.cuh.
#include "engine/kernels/loss_scale.h"

#include <cuda_runtime.h>

#include "engine/kernels/loss_scale_kernels.cuh"

namespace ringmaster::kernels {

int LaunchStepPrologue(DeviceStepControl* control, float max_norm, const LossScalePolicy& policy, void* stream) {
  loss_scale::StepPrologueKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(control, max_norm, policy);
  return static_cast<int>(cudaGetLastError());
}

int LaunchLossScaleUpdate(DeviceStepControl* control, const LossScalePolicy& policy, void* stream) {
  loss_scale::LossScaleUpdateKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(control, policy);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ringmaster::kernels
