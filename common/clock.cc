#include "common/clock.h"

namespace ringmaster {

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

void Clock::WaitOnce(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) {
    cv.wait(lock);
    return;
  }
  // wait_for measures on the steady clock; the deadline is still this clock's.
  const absl::Duration left = deadline - Now();
  if (left > absl::ZeroDuration()) cv.wait_for(lock, absl::ToChronoNanoseconds(left));
}

void RealClock::SleepUntil(absl::Time deadline) {
  absl::Duration d = deadline - absl::Now();
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

absl::Time FakeClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

void FakeClock::SleepUntil(absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  ++sleepers_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return now_ >= deadline; });
  --sleepers_;
}

void FakeClock::WaitOnce(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, absl::Time deadline) {
  {
    std::lock_guard<std::mutex> own(mu_);
    if (now_ >= deadline) return;
    waiting_.insert(&cv);
    ++sleepers_;
    cv_.notify_all();
  }
  // Advance notifies `cv` without the caller's mutex (taking it could
  // deadlock), so a notification can fall between the check above and the
  // wait: the short real-time bound makes such a miss cost a few milliseconds.
  cv.wait_for(lock, std::chrono::milliseconds(5));
  std::lock_guard<std::mutex> own(mu_);
  waiting_.erase(waiting_.find(&cv));
  --sleepers_;
}

void FakeClock::Advance(absl::Duration d) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ += d;
  cv_.notify_all();
  for (std::condition_variable* waiter : waiting_) waiter->notify_all();
}

void FakeClock::SetTime(absl::Time t) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ = t;
  cv_.notify_all();
  for (std::condition_variable* waiter : waiting_) waiter->notify_all();
}

bool FakeClock::AwaitSleepers(int n, absl::Duration timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return sleepers_ >= n; });
}

int FakeClock::Sleepers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sleepers_;
}

}  // namespace ringmaster
