#ifndef RINGMASTER_ENGINE_OPTIM_LR_SCHEDULE_H_
#define RINGMASTER_ENGINE_OPTIM_LR_SCHEDULE_H_

// Learning-rate schedules and the large-batch scaling rules.
//
// `step` is the 0-based index of the optimizer step about to run (use the
// optimizer's step_count(), so skipped fp16 steps do not advance the schedule).
//
//   warm-up (any decay):  lr(s) = base_lr * (s + 1) / W          for s < W
//                         (the first step uses base_lr / W, step W - 1 uses base_lr)
//   after warm-up, with p = s - W (steps since warm-up ended):
//     constant:           lr = base_lr
//     cosine:             lr = min_lr + (base_lr - min_lr) * 0.5 * (1 + cos(pi * p / decay_steps))
//                         for p < decay_steps, then min_lr
//     step:               lr = base_lr * gamma^floor(p / step_size)
// Stateless and thread-safe.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::engine::optim {

enum class LrDecay { kConstant, kCosine, kStep };

struct LrScheduleConfig {
  float base_lr = 0.01f;     // > 0, finite
  int64_t warmup_steps = 0;  // W >= 0; 0 = no warm-up
  LrDecay decay = LrDecay::kConstant;
  int64_t decay_steps = 0;  // cosine: > 0
  float min_lr = 0.0f;      // cosine: in [0, base_lr]
  int64_t step_size = 0;    // step: > 0
  float gamma = 0.1f;       // step: in (0, 1]
};

class LrSchedule {
 public:
  // INVALID_ARGUMENT names the bad field.
  static absl::StatusOr<LrSchedule> Create(const LrScheduleConfig& config);

  // The learning rate for 0-based step `step` (a negative step counts as 0).
  float LearningRate(int64_t step) const;

  const LrScheduleConfig& config() const { return config_; }

 private:
  explicit LrSchedule(const LrScheduleConfig& config) : config_(config) {}
  LrScheduleConfig config_;
};

// How the learning rate grows with the global batch (Goyal et al. 2017 linear;
// Krizhevsky 2014 / Hoffer et al. 2017 square root).
enum class LrScalingRule { kNone, kLinear, kSqrt };

const char* LrScalingRuleName(LrScalingRule rule);  // "none", "linear", "sqrt"
absl::StatusOr<LrScalingRule> ParseLrScalingRule(absl::string_view name);

// none: base_lr; linear: base_lr * global_batch / reference_batch;
// sqrt: base_lr * sqrt(global_batch / reference_batch). Batches must be > 0
// (INVALID_ARGUMENT otherwise).
absl::StatusOr<float> ScaleLearningRate(float base_lr, int64_t global_batch, int64_t reference_batch,
                                        LrScalingRule rule);

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_LR_SCHEDULE_H_
