#include "common/retry.h"

#include <algorithm>

namespace ringmaster {
namespace {

absl::Time GiveUpAt(const Clock* clock, absl::Duration deadline) {
  return deadline == absl::InfiniteDuration() ? absl::InfiniteFuture() : clock->Now() + deadline;
}

}  // namespace

Retry::Retry(const Clock* clock, RetryPolicy policy, uint64_t seed)
    : clock_(clock),
      policy_(policy),
      current_(policy.initial),
      give_up_at_(GiveUpAt(clock, policy.deadline)),
      rng_(seed) {}

std::optional<absl::Duration> Retry::NextDelay() {
  const absl::Duration base = std::min(current_, policy_.max);
  current_ = std::min(current_ * policy_.multiplier, policy_.max);
  absl::Duration delay = base;
  if (policy_.jitter > 0) {
    std::uniform_real_distribution<double> spread(1.0 - policy_.jitter, 1.0 + policy_.jitter);
    delay = std::min(base * spread(rng_), policy_.max);
  }
  if (give_up_at_ != absl::InfiniteFuture() && clock_->Now() + delay >= give_up_at_) return std::nullopt;
  return delay;
}

void Retry::Reset() {
  current_ = policy_.initial;
  give_up_at_ = GiveUpAt(clock_, policy_.deadline);
}

}  // namespace ringmaster
