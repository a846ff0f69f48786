// The loss scaler's decision and update on the device (loss_scale.h). Both
// kernels run as a single thread: they touch a few scalars, and keeping them
// on the stream is what spares the host a synchronisation.
#include "engine/kernels/loss_scale.h"

#include <cuda_runtime.h>

namespace ringmaster::kernels {
namespace {

// optim::ClipCoefficient: min(1, max_norm / (norm + 1e-6)); 1 when clipping is
// off or the norm is not finite.
__device__ float ClipCoefficient(double norm, float max_norm) {
  if (max_norm <= 0.0f || !isfinite(norm)) return 1.0f;
  const double coeff = static_cast<double>(max_norm) / (norm + 1e-6);
  return coeff < 1.0 ? static_cast<float>(coeff) : 1.0f;
}

__global__ void StepPrologueKernel(DeviceStepControl* c, float max_norm, LossScalePolicy policy) {
  // The fp64 sum of fp32 squares cannot overflow, so it is inf/NaN exactly
  // when a gradient is: the flag is confirmed (or set) without another pass.
  const bool nonfinite = c->found_nonfinite != 0.0f || !isfinite(c->grad_sum_squares);
  const bool skip = policy.enabled != 0 && nonfinite;
  c->skip = skip ? 1 : 0;
  // As the CPU trainer: the inverse scale in fp32, the norm in fp64.
  const float inverse_scale = 1.0f / c->loss_scale;
  const double norm = skip ? 0.0 : inverse_scale * sqrt(c->grad_sum_squares);
  c->grad_norm = static_cast<float>(norm);
  c->grad_scale = skip ? inverse_scale : inverse_scale * ClipCoefficient(norm, max_norm);
}

__global__ void LossScaleUpdateKernel(DeviceStepControl* c, LossScalePolicy policy) {
  if (c->skip) {
    c->loss_scale = fmaxf(c->loss_scale * policy.backoff_factor, policy.min_scale);
    c->clean_steps = 0;
    ++c->skipped_steps;
  } else {
    ++c->optimizer_steps;
    if (policy.enabled && ++c->clean_steps >= policy.growth_interval) {
      c->loss_scale = fminf(c->loss_scale * policy.growth_factor, policy.max_scale);
      c->clean_steps = 0;
    }
  }
  c->found_nonfinite = 0.0f;
}

}  // namespace

int LaunchStepPrologue(DeviceStepControl* control, float max_norm, const LossScalePolicy& policy, void* stream) {
  StepPrologueKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(control, max_norm, policy);
  return static_cast<int>(cudaGetLastError());
}

int LaunchLossScaleUpdate(DeviceStepControl* control, const LossScalePolicy& policy, void* stream) {
  LossScaleUpdateKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(control, policy);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ringmaster::kernels
