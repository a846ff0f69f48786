#include "coordinator/core/executor.h"

#include <pthread.h>

#include <utility>

#include "absl/time/clock.h"

namespace ringmaster::coordinator {

Executor::Executor(ExecutorOptions options) : options_(std::move(options)) {}

Executor::~Executor() { Shutdown(); }

void Executor::MaybeGrowLocked() {
  const size_t waiting = queue_.size() + (delayed_.empty() ? 0 : 1);
  if (idle_ >= waiting || threads_.size() >= options_.max_threads) return;
  threads_.emplace_back([this] { Loop(); });
}

bool Executor::Post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  if (options_.reject_when_busy && idle_ <= queue_.size() && threads_.size() >= options_.max_threads) return false;
  queue_.push_back(std::move(task));
  MaybeGrowLocked();
  cv_.notify_one();
  return true;
}

bool Executor::PostAfter(absl::Duration delay, std::function<void()> task) {
  if (delay <= absl::ZeroDuration()) return Post(std::move(task));
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  delayed_.emplace(absl::Now() + delay, std::move(task));
  MaybeGrowLocked();
  cv_.notify_all();  // the thread watching the earliest timer re-arms
  return true;
}

void Executor::Shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    // Delayed tasks run now, with the rest.
    for (auto& [when, task] : delayed_) queue_.push_back(std::move(task));
    delayed_.clear();
    if (threads_.empty() && !queue_.empty()) threads_.emplace_back([this] { Loop(); });
    threads.swap(threads_);
    cv_.notify_all();
  }
  for (std::thread& t : threads) t.join();
}

void Executor::Loop() {
  pthread_setname_np(pthread_self(), options_.name.substr(0, 15).c_str());  // for ps, gdb, perf
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const absl::Time now = absl::Now();
    while (!delayed_.empty() && delayed_.begin()->first <= now) {
      queue_.push_back(std::move(delayed_.begin()->second));
      delayed_.erase(delayed_.begin());
    }
    if (!queue_.empty()) {
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
      lock.unlock();
      task();
      task = nullptr;  // its captures die outside the lock
      lock.lock();
      --busy_;
      continue;
    }
    if (stopping_) return;
    ++idle_;
    if (delayed_.empty()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, absl::ToChronoTime(delayed_.begin()->first));
    }
    --idle_;
  }
}

size_t Executor::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

size_t Executor::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

}  // namespace ringmaster::coordinator
