#ifndef RINGMASTER_COMMON_CLOCK_H_
#define RINGMASTER_COMMON_CLOCK_H_

// Time, injected. Leases, heartbeats, deadlines and retries take a Clock so
// that tests drive them with FakeClock instead of sleeping.

#include <condition_variable>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ringmaster {

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Blocks until Now() >= deadline.
  virtual void SleepUntil(absl::Time deadline) = 0;
  void SleepFor(absl::Duration d) { SleepUntil(Now() + d); }

  // The process-wide real clock.
  static Clock* Real();
};

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepUntil(absl::Time deadline) override;
};

// A clock that moves only when told to. SleepUntil blocks until another thread
// advances the time past the deadline. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24 * 365 * 50))
      : now_(start) {}

  absl::Time Now() const override;
  void SleepUntil(absl::Time deadline) override;

  void Advance(absl::Duration d);
  void SetTime(absl::Time t);
  // Number of threads blocked in SleepUntil right now (lets a test wait until
  // the code under test is parked before advancing time).
  int Sleepers() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  absl::Time now_;
  int sleepers_ = 0;
};

// A deadline against an injected clock.
class Deadline {
 public:
  Deadline(const Clock* clock, absl::Duration timeout)
      : clock_(clock), at_(clock->Now() + timeout) {}
  bool Expired() const { return clock_->Now() >= at_; }
  absl::Duration Remaining() const { return std::max(at_ - clock_->Now(), absl::ZeroDuration()); }
  absl::Time at() const { return at_; }

 private:
  const Clock* clock_;
  absl::Time at_;
};

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_CLOCK_H_
