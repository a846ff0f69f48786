#include "common/clock.h"

namespace ringmaster {

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
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

void FakeClock::Advance(absl::Duration d) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ += d;
  cv_.notify_all();
}

void FakeClock::SetTime(absl::Time t) {
  std::lock_guard<std::mutex> lock(mu_);
  now_ = t;
  cv_.notify_all();
}

int FakeClock::Sleepers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sleepers_;
}

}  // namespace ringmaster
