#include "worker/backoff.h"

#include <algorithm>

namespace ringmaster::worker {

Backoff::Backoff(BackoffOptions options, uint64_t seed) : options_(options), current_(options.initial), rng_(seed) {}

absl::Duration Backoff::Next() {
  const absl::Duration base = std::min(current_, options_.max);
  current_ = std::min(current_ * options_.multiplier, options_.max);
  if (options_.jitter <= 0) return base;
  std::uniform_real_distribution<double> spread(1.0 - options_.jitter, 1.0 + options_.jitter);
  return std::min(base * spread(rng_), options_.max);
}

void Backoff::Reset() { current_ = options_.initial; }

}  // namespace ringmaster::worker
