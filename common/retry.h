#ifndef RINGMASTER_COMMON_RETRY_H_
#define RINGMASTER_COMMON_RETRY_H_

// Retry: the delays between attempts of a call that may succeed later (a
// coordinator that is restarting, a server not up yet, a service at one of
// its limits). Exponential from `initial`, multiplied by `multiplier` after
// every failure up to `max`; each delay spread by +/- `jitter` (a fraction)
// so that the clients turned away together do not all come back at the same
// instant, and never above `max`. With a finite `deadline` (counted on the
// injected clock from construction or the last Reset), no delay is given that
// would end at or past it: the caller gives up instead.
//
//   Retry retry(clock, policy);
//   while (!(status = Call()).ok()) {
//     std::optional<absl::Duration> delay = retry.NextDelay();
//     if (!delay) return status;          // the deadline would pass
//     clock->SleepFor(*delay);
//   }
//
// Not thread-safe (one per retrying loop).

#include <cstdint>
#include <optional>
#include <random>

#include "absl/time/time.h"
#include "common/clock.h"

namespace ringmaster {

struct RetryPolicy {
  absl::Duration initial = absl::Milliseconds(500);
  absl::Duration max = absl::Seconds(30);
  double multiplier = 2.0;
  double jitter = 0.2;  // in [0, 1)
  // Total time to keep retrying, from the start (or the last Reset).
  absl::Duration deadline = absl::InfiniteDuration();
};

class Retry {
 public:
  // `clock` must outlive the Retry; `seed` makes the jitter reproducible.
  Retry(const Clock* clock, RetryPolicy policy, uint64_t seed = std::random_device{}());

  // The delay before the next attempt (grows after every call), or nullopt
  // when waiting it would reach the deadline.
  std::optional<absl::Duration> NextDelay();
  // Back to `initial`, and the deadline counts again from now (after a success).
  void Reset();
  // When the caller stops retrying (InfiniteFuture without a deadline).
  absl::Time give_up_at() const { return give_up_at_; }

 private:
  const Clock* const clock_;
  const RetryPolicy policy_;
  absl::Duration current_;
  absl::Time give_up_at_;
  std::mt19937_64 rng_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_RETRY_H_
