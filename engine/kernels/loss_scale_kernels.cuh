// The loss scaler's kernels (loss_scale.h). Both run as a single thread
// (launch <<<1, 1>>>): they touch a few scalars, and keeping them on the
// stream is what spares the host a synchronisation.
//
// Included by loss_scale.cu and by the host emulation tests; includes
// device_util.cuh and plain C++ headers only (the includer provides the CUDA
// built-ins).
#ifndef RINGMASTER_ENGINE_KERNELS_LOSS_SCALE_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_LOSS_SCALE_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"
#include "engine/kernels/loss_scale.h"

namespace ringmaster::kernels::loss_scale {

// optim::ClipCoefficient: min(1, max_norm / (norm + 1e-6)); 1 when clipping is
// off or the norm is not finite.
__device__ inline float ClipCoefficient(double norm, float max_norm) {
  if (max_norm <= 0.0f || !IsFinite(norm)) return 1.0f;
  const double coeff = static_cast<double>(max_norm) / (norm + 1e-6);
  return coeff < 1.0 ? static_cast<float>(coeff) : 1.0f;
}

__global__ void __launch_bounds__(1) StepPrologueKernel(DeviceStepControl* c, float max_norm, LossScalePolicy policy) {
  // The fp64 sum of fp32 squares cannot overflow, so it is inf/NaN exactly
  // when a gradient is: the flag is confirmed (or set) without another pass.
  const bool nonfinite = c->found_nonfinite != 0.0f || !IsFinite(c->grad_sum_squares);
  const bool skip = policy.enabled != 0 && nonfinite;
  c->skip = skip ? 1 : 0;
  // As the CPU trainer: the inverse scale in fp32, the norm in fp64.
  const float inverse_scale = 1.0f / c->loss_scale;
  const double norm = skip ? 0.0 : inverse_scale * sqrt(c->grad_sum_squares);
  c->grad_norm = static_cast<float>(norm);
  c->grad_scale = skip ? inverse_scale : inverse_scale * ClipCoefficient(norm, max_norm);
}

__global__ void __launch_bounds__(1) LossScaleUpdateKernel(DeviceStepControl* c, LossScalePolicy policy) {
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

}  // namespace ringmaster::kernels::loss_scale

#endif  // RINGMASTER_ENGINE_KERNELS_LOSS_SCALE_KERNELS_CUH_
