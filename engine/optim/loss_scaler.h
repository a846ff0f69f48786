#ifndef RINGMASTER_ENGINE_OPTIM_LOSS_SCALER_H_
#define RINGMASTER_ENGINE_OPTIM_LOSS_SCALER_H_

// Dynamic loss scaling for fp16 training (the policy of PyTorch's GradScaler):
// the loss is multiplied by scale() before backward, so the grads arrive
// multiplied by it; the optimizer reads them with grad_scale = inverse_scale().
// After each backward the caller checks the grads (HasNonFiniteGrad in
// grad_norm.h on the CPU; the CUDA backend keeps the check on the device) and
// calls Update:
//   - inf/NaN: the step is skipped, scale *= backoff_factor (not below
//     min_scale), the clean-step count restarts at 0, skipped_steps() += 1;
//   - clean: the clean-step count grows; when it reaches growth_interval the
//     scale *= growth_factor (not above max_scale) and the count restarts.
// min_scale floor: at the floor an overflow still skips the step but the scale
// stays; a run stuck there has a genuinely non-finite loss, which no scale fixes.
// Disabled (bf16/fp32): scale 1, Update never skips and counts nothing.
//
// Order matters: read inverse_scale() for the step's grads BEFORE Update,
// which may change the scale for the next step.
// Not thread-safe: the training thread owns it.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::engine::optim {

struct LossScalerConfig {
  bool enabled = true;
  float initial_scale = 65536.0f;  // finite, in [min_scale, max_scale]
  float growth_factor = 2.0f;      // > 1
  float backoff_factor = 0.5f;     // in (0, 1)
  int64_t growth_interval = 2000;  // clean steps per growth, > 0
  float min_scale = 1.0f;          // > 0
  float max_scale = 16777216.0f;   // 2^24 (apex's cap), finite
};

// What a checkpoint stores.
struct LossScalerState {
  float scale = 1.0f;
  int64_t clean_steps = 0;    // consecutive clean steps since the last scale change
  int64_t skipped_steps = 0;  // steps skipped since the run began
};

class LossScaler {
 public:
  // INVALID_ARGUMENT names the bad field. A disabled config is not checked.
  static absl::StatusOr<LossScaler> Create(const LossScalerConfig& config);
  static LossScaler Disabled();

  // Records whether this step's grads had inf/NaN; returns true when the
  // optimizer step must be skipped.
  bool Update(bool found_nonfinite);

  bool enabled() const { return config_.enabled; }
  float scale() const { return scale_; }
  float inverse_scale() const { return 1.0f / scale_; }
  int64_t clean_steps() const { return clean_steps_; }
  int64_t skipped_steps() const { return skipped_steps_; }

  LossScalerState State() const { return {scale_, clean_steps_, skipped_steps_}; }
  // INVALID_ARGUMENT (nothing changed) when the scale is not finite or outside
  // [min_scale, max_scale], or a count is negative; a disabled scaler accepts
  // only scale 1 with zero counts.
  absl::Status LoadState(const LossScalerState& state);

 private:
  explicit LossScaler(const LossScalerConfig& config)
      : config_(config), scale_(config.enabled ? config.initial_scale : 1.0f) {}

  LossScalerConfig config_;
  float scale_;
  int64_t clean_steps_ = 0;
  int64_t skipped_steps_ = 0;
};

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_LOSS_SCALER_H_
