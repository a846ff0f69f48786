#include "coordinator/core/ticker.h"

#include <pthread.h>

#include <utility>

#include "absl/time/clock.h"

namespace ringmaster::coordinator {

Ticker::Ticker(absl::Duration interval, std::function<void()> tick) : interval_(interval), tick_(std::move(tick)) {}

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

void Ticker::Loop() {
  pthread_setname_np(pthread_self(), "ticker");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    poked_ = false;
    lock.unlock();
    tick_();
    lock.lock();
    ++ticks_;
    cv_.wait_for(lock, absl::ToChronoNanoseconds(interval_), [&] { return stopping_ || poked_; });
  }
}

}  // namespace ringmaster::coordinator
