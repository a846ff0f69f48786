#include "engine/parallel/bucket_reducer.h"

#include <utility>

namespace ringmaster::engine::parallel {

BucketReducer::BucketReducer(dist::ProcessGroup& group, Clock& clock, bool threaded)
    : group_(group), clock_(clock), threaded_(threaded) {
  if (threaded_) thread_ = std::thread([this] { Loop(); });
}

BucketReducer::~BucketReducer() {
  if (!threaded_) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return pending_ == 0; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BucketReducer::Submit(Tensor tensor) {
  if (!threaded_) {
    Reduce(tensor);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(tensor));
    ++pending_;
  }
  cv_.notify_all();
}

void BucketReducer::Reduce(const Tensor& tensor) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_.ok()) return;  // the group is broken: later calls would only fail
  }
  const absl::Time start = clock_.Now();
  absl::Status status = group_.AllReduce(tensor, dist::ReduceOp::kAvg);
  const absl::Time end = clock_.Now();
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.ok()) {
    error_ = std::move(status);
    return;
  }
  timings_.push_back({start, end});
}

void BucketReducer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Tensor tensor = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Reduce(tensor);
    lock.lock();
    --pending_;
    cv_.notify_all();
  }
}

absl::Status BucketReducer::Wait(std::vector<Timing>* timings) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return pending_ == 0; });
  absl::Status status = std::move(error_);
  error_ = absl::OkStatus();
  if (timings != nullptr) *timings = std::move(timings_);
  timings_.clear();
  return status;
}

}  // namespace ringmaster::engine::parallel
