#ifndef RINGMASTER_COMMON_CLOCK_H_
#define RINGMASTER_COMMON_CLOCK_H_

// Time, injected. Leases, heartbeats, deadlines and retries take a Clock so
// that tests drive them with FakeClock instead of sleeping.

#include <condition_variable>
#include <mutex>
#include <set>

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

  // Waits on `cv` (whose mutex `lock` holds) until `done()` or until Now()
  // reaches `deadline`; returns done(). Whoever makes `done()` true notifies
  // `cv`, as with std::condition_variable::wait_until, so a thread that
  // waits for time or for work can be driven by a FakeClock.
  template <typename Predicate>
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, absl::Time deadline,
                 Predicate done) {
    while (!done()) {
      if (Now() >= deadline) return false;
      WaitOnce(lock, cv, deadline);
    }
    return true;
  }

  // The process-wide real clock.
  static Clock* Real();

 protected:
  // One wait on `cv` that ends by `deadline` (this clock's time) at the
  // latest, or earlier (a notification, spuriously). The default waits in
  // real time, for clocks that follow it.
  virtual void WaitOnce(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, absl::Time deadline);
};

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepUntil(absl::Time deadline) override;
};

// A clock that moves only when told to. SleepUntil and WaitUntil block until
// another thread advances the time past the deadline (WaitUntil also ends on
// its condition variable's notification). Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24 * 365 * 50))
      : now_(start) {}

  absl::Time Now() const override;
  void SleepUntil(absl::Time deadline) override;

  void Advance(absl::Duration d);
  void SetTime(absl::Time t);
  // Number of threads blocked in SleepUntil or WaitUntil right now (lets a
  // test wait until the code under test is parked before advancing time).
  int Sleepers() const;
  // Blocks (in real time, at most `timeout`) until Sleepers() >= n; false if
  // it did not happen.
  bool AwaitSleepers(int n, absl::Duration timeout = absl::Seconds(10)) const;

 protected:
  void WaitOnce(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, absl::Time deadline) override;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  absl::Time now_;
  int sleepers_ = 0;
  // The condition variables of the threads in WaitOnce, notified by Advance.
  std::multiset<std::condition_variable*> waiting_;
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
