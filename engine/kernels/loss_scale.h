#ifndef RINGMASTER_ENGINE_KERNELS_LOSS_SCALE_H_
#define RINGMASTER_ENGINE_KERNELS_LOSS_SCALE_H_

// Dynamic loss scaling and gradient clipping decided on the device. Per step,
// on one stream and with no host synchronisation in between:
//   1. backward writes grads times control->loss_scale;
//   2. Backend::NonFiniteCheck(grads, flag) ORs inf/NaN into
//      control->found_nonfinite (an f32 on the device);
//   3. grad_norm.h: control->grad_sum_squares = sum of stored grad^2;
//   4. LaunchStepPrologue: skip, the true-grad norm and the effective
//      grad_scale = clip / loss_scale that the optimizer kernels read;
//   5. the fused optimizer kernels (optim_update.h) do nothing when skip is set;
//   6. LaunchLossScaleUpdate: the scale, the counters and the optimizer step
//      count, with the policy of optim::LossScaler::Update; found_nonfinite is
//      cleared for the next step.
// The host copies the control block (a few dozen bytes) to pinned memory
// asynchronously and reads it after the step's one Backend::Synchronize, for
// reports, checkpoints and the next step's scale.
//
// Plain C++ header; launchers return the cudaError_t of the launch as int.

#include <cstdint>

#include "engine/kernels/optim_multi_tensor.h"

namespace ringmaster::kernels {

// Lives in device memory (one per trainer); standard layout, the same for
// nvcc and the host compiler.
struct DeviceStepControl {
  float loss_scale = 1.0f;        // the scale this step's backward used
  float found_nonfinite = 0.0f;   // NonFiniteCheck's flag: non-zero = inf/NaN seen
  float grad_scale = 1.0f;        // effective factor stored grad -> clipped true grad
  float grad_norm = 0.0f;         // global L2 norm of the true gradients (0 when skipped)
  double grad_sum_squares = 0.0;  // sum of stored grad^2 (fp64)
  int32_t skip = 0;               // 1: this step's update is skipped
  int32_t pad = 0;
  int64_t clean_steps = 0;        // consecutive clean steps since the last scale change
  int64_t skipped_steps = 0;      // steps skipped since the run began
  int64_t optimizer_steps = 0;    // updates applied (what Adam's bias correction counts)
  // Set by a host that replays a captured step (CUDA graphs): with
  // device_hyper = 1 the optimizer kernels take the learning rate from `lr`
  // and the Adam-family step from optimizer_steps + 1 instead of their launch
  // arguments, so one graph serves every step. Written by the host before
  // each step (an async copy); 0 everywhere else.
  float lr = 0.0f;
  int32_t device_hyper = 0;
};

// optim::LossScalerConfig's policy, as launch arguments.
struct LossScalePolicy {
  int32_t enabled = 0;  // 0: never skip, the scale stays (bf16/fp32)
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  float min_scale = 1.0f;
  float max_scale = 16777216.0f;
};

// Sets skip (policy enabled, and found_nonfinite or a grad_sum_squares that
// is not finite: an inf/NaN grad makes it so), grad_norm = sqrt(sum) /
// loss_scale, and grad_scale = ClipCoefficient(grad_norm, max_norm) /
// loss_scale (as optim::ClipCoefficient; max_norm <= 0: no clipping).
int LaunchStepPrologue(DeviceStepControl* control, float max_norm, const LossScalePolicy& policy, void* stream);

// The scale update of optim::LossScaler::Update(skip), optimizer_steps += !skip,
// and found_nonfinite = 0.
int LaunchLossScaleUpdate(DeviceStepControl* control, const LossScalePolicy& policy, void* stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_LOSS_SCALE_H_
