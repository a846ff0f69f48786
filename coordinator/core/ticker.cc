#include "coordinator/core/ticker.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/time/clock.h"

namespace ringmaster::coordinator {

Ticker::Ticker(absl::Duration interval, std::function<void()> tick, std::function<void()> on_poke)
    : interval_(interval), tick_(std::move(tick)), on_poke_(std::move(on_poke)) {}

Ticker::~Ticker() { Stop(); }

void Ticker::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void Ticker::Poke() {
  std::lock_guard<std::mutex> lock(mu_);
  poked_ = true;
  cv_.notify_all();
}

void Ticker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

int64_t Ticker::ticks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ticks_;
}

int64_t Ticker::poked_passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return poked_passes_;
}

void Ticker::Loop() {
  pthread_setname_np(pthread_self(), "ticker");
  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(interval_));
  Clock::time_point next_tick = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    if (now >= next_tick) {
      // Checked first, so that no stream of pokes can delay a tick (lost
      // nodes are found on time). Ticks start `interval` apart, but a tick
      // that overran leaves half an interval before the next, so that a slow
      // tick cannot take the thread (and a core) for good.
      poked_ = false;
      lock.unlock();
      tick_();
      lock.lock();
      ++ticks_;
      next_tick = std::max(now + interval, Clock::now() + interval / 2);
    } else if (poked_) {
      poked_ = false;
      lock.unlock();
      on_poke_();
      lock.lock();
      ++poked_passes_;
    } else {
      cv_.wait_until(lock, next_tick, [&] { return stopping_ || poked_; });
    }
  }
}

}  // namespace ringmaster::coordinator
