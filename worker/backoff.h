#ifndef RINGMASTER_WORKER_BACKOFF_H_
#define RINGMASTER_WORKER_BACKOFF_H_

// Backoff: the delays between attempts to reach the coordinator. Exponential
// from `initial`, multiplied by `multiplier` per failure up to `max`, each
// delay spread by +/- jitter (a fraction) so that the workers of a cluster do
// not all come back at the same instant after a coordinator restart. No
// delay exceeds `max`.
// Not thread-safe (one per retrying loop).

#include <cstdint>
#include <random>

#include "absl/time/time.h"

namespace ringmaster::worker {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(500);
  absl::Duration max = absl::Seconds(30);
  double multiplier = 2.0;
  double jitter = 0.2;  // in [0, 1)
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options, uint64_t seed = std::random_device{}());

  // The delay before the next attempt; grows after every call.
  absl::Duration Next();
  // Back to `initial` (after a success).
  void Reset();

 private:
  const BackoffOptions options_;
  absl::Duration current_;
  std::mt19937_64 rng_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_BACKOFF_H_
