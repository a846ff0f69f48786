#include "engine/optim/lr_schedule.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ringmaster::engine::optim {
namespace {

constexpr double kPi = 3.14159265358979323846;

}  // namespace

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleConfig& c) {
  if (!(std::isfinite(c.base_lr) && c.base_lr > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("lr schedule base_lr must be finite and > 0, got ", c.base_lr));
  }
  if (c.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("lr schedule warmup_steps must be >= 0, got ", c.warmup_steps));
  }
  switch (c.decay) {
    case LrDecay::kConstant:
      break;
    case LrDecay::kCosine:
      if (c.decay_steps <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("cosine lr schedule decay_steps must be > 0, got ", c.decay_steps));
      }
      if (!(c.min_lr >= 0.0f && c.min_lr <= c.base_lr)) {
        return absl::InvalidArgumentError(
            absl::StrCat("cosine lr schedule min_lr must be in [0, base_lr = ", c.base_lr, "], got ", c.min_lr));
      }
      break;
    case LrDecay::kStep:
      if (c.step_size <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("step lr schedule step_size must be > 0, got ", c.step_size));
      }
      if (!(c.gamma > 0.0f && c.gamma <= 1.0f)) {
        return absl::InvalidArgumentError(absl::StrCat("step lr schedule gamma must be in (0, 1], got ", c.gamma));
      }
      break;
  }
  return LrSchedule(c);
}

float LrSchedule::LearningRate(int64_t step) const {
  const LrScheduleConfig& c = config_;
  if (step < 0) step = 0;
  if (step < c.warmup_steps) {
    return static_cast<float>(static_cast<double>(c.base_lr) * static_cast<double>(step + 1) /
                              static_cast<double>(c.warmup_steps));
  }
  const int64_t p = step - c.warmup_steps;
  switch (c.decay) {
    case LrDecay::kConstant:
      return c.base_lr;
    case LrDecay::kCosine: {
      if (p >= c.decay_steps) return c.min_lr;
      const double progress = static_cast<double>(p) / static_cast<double>(c.decay_steps);
      const double coeff = 0.5 * (1.0 + std::cos(kPi * progress));
      return static_cast<float>(c.min_lr + (static_cast<double>(c.base_lr) - c.min_lr) * coeff);
    }
    case LrDecay::kStep:
      return static_cast<float>(c.base_lr *
                                std::pow(static_cast<double>(c.gamma), static_cast<double>(p / c.step_size)));
  }
  return c.base_lr;
}

const char* LrScalingRuleName(LrScalingRule rule) {
  switch (rule) {
    case LrScalingRule::kNone:
      return "none";
    case LrScalingRule::kLinear:
      return "linear";
    case LrScalingRule::kSqrt:
      return "sqrt";
  }
  return "unknown";
}

absl::StatusOr<LrScalingRule> ParseLrScalingRule(absl::string_view name) {
  for (LrScalingRule r : {LrScalingRule::kNone, LrScalingRule::kLinear, LrScalingRule::kSqrt}) {
    if (name == LrScalingRuleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown lr scaling rule \"", name, "\"; expected none, linear or sqrt"));
}

absl::StatusOr<float> ScaleLearningRate(float base_lr, int64_t global_batch, int64_t reference_batch,
                                        LrScalingRule rule) {
  if (global_batch <= 0 || reference_batch <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("lr scaling needs batches > 0, got global_batch ", global_batch,
                                                   " and reference_batch ", reference_batch));
  }
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(reference_batch);
  switch (rule) {
    case LrScalingRule::kNone:
      return base_lr;
    case LrScalingRule::kLinear:
      return static_cast<float>(base_lr * ratio);
    case LrScalingRule::kSqrt:
      return static_cast<float>(base_lr * std::sqrt(ratio));
  }
  return absl::InvalidArgumentError("unknown lr scaling rule");
}

}  // namespace ringmaster::engine::optim
