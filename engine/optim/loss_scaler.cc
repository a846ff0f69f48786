#include "engine/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace ringmaster::engine::optim {

absl::StatusOr<LossScaler> LossScaler::Create(const LossScalerConfig& c) {
  if (!c.enabled) return Disabled();
  if (!(std::isfinite(c.min_scale) && c.min_scale > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("loss scaler min_scale must be finite and > 0, got ", c.min_scale));
  }
  if (!(std::isfinite(c.max_scale) && c.max_scale >= c.min_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler max_scale must be finite and >= min_scale ", c.min_scale, ", got ", c.max_scale));
  }
  if (!(c.initial_scale >= c.min_scale && c.initial_scale <= c.max_scale)) {
    return absl::InvalidArgumentError(absl::StrCat("loss scaler initial_scale must be in [", c.min_scale, ", ",
                                                   c.max_scale, "], got ", c.initial_scale));
  }
  if (!(std::isfinite(c.growth_factor) && c.growth_factor > 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler growth_factor must be finite and > 1, got ", c.growth_factor));
  }
  if (!(c.backoff_factor > 0.0f && c.backoff_factor < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scaler backoff_factor must be in (0, 1), got ", c.backoff_factor));
  }
  if (c.growth_interval <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("loss scaler growth_interval must be > 0, got ", c.growth_interval));
  }
  return LossScaler(c);
}

LossScaler LossScaler::Disabled() {
  LossScalerConfig c;
  c.enabled = false;
  return LossScaler(c);
}

bool LossScaler::Update(bool found_nonfinite) {
  if (!config_.enabled) return false;
  if (found_nonfinite) {
    scale_ = std::max(scale_ * config_.backoff_factor, config_.min_scale);
    clean_steps_ = 0;
    ++skipped_steps_;
    return true;
  }
  if (++clean_steps_ >= config_.growth_interval) {
    scale_ = std::min(scale_ * config_.growth_factor, config_.max_scale);
    clean_steps_ = 0;
  }
  return false;
}

absl::Status LossScaler::LoadState(const LossScalerState& s) {
  if (s.clean_steps < 0 || s.skipped_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("loss scaler counts must be >= 0, got clean_steps ", s.clean_steps,
                                                   " and skipped_steps ", s.skipped_steps));
  }
  if (!config_.enabled) {
    if (s.scale != 1.0f || s.clean_steps != 0 || s.skipped_steps != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("a disabled loss scaler takes only scale 1 and zero counts, got scale ", s.scale,
                       ", clean_steps ", s.clean_steps, ", skipped_steps ", s.skipped_steps));
    }
    return absl::OkStatus();
  }
  if (!(std::isfinite(s.scale) && s.scale >= config_.min_scale && s.scale <= config_.max_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss scale must be in [", config_.min_scale, ", ", config_.max_scale, "], got ", s.scale));
  }
  scale_ = s.scale;
  clean_steps_ = s.clean_steps;
  skipped_steps_ = s.skipped_steps;
  return absl::OkStatus();
}

}  // namespace ringmaster::engine::optim
