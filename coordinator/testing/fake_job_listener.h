#ifndef RINGMASTER_COORDINATOR_FAKE_JOB_LISTENER_H_
#define RINGMASTER_COORDINATOR_FAKE_JOB_LISTENER_H_

// A JobListener that records every call, for tests. Thread-safe.

#include <mutex>
#include <string>
#include <vector>

#include "coordinator/core/job_controller.h"

namespace ringmaster::coordinator {

class FakeJobListener : public JobListener {
 public:
  void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) override {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
    events_.insert(events_.end(), events.begin(), events.end());
  }
  void OnStartRanks(const StartOrder& order) override {
    std::lock_guard<std::mutex> lock(mu_);
    starts_.push_back(order);
  }
  void OnStopRanks(const StopOrder& order) override {
    std::lock_guard<std::mutex> lock(mu_);
    stops_.push_back(order);
  }

  void OnCheckpointNow(const CheckpointOrder& order) override {
    std::lock_guard<std::mutex> lock(mu_);
    checkpoints_.push_back(order);
  }

  std::vector<CheckpointOrder> checkpoint_orders() const {
    std::lock_guard<std::mutex> lock(mu_);
    return checkpoints_;
  }
  std::vector<v1::Job> jobs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_;
  }
  std::vector<v1::JobEvent> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::vector<StartOrder> starts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return starts_;
  }
  std::vector<StopOrder> stops() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stops_;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.clear();
    events_.clear();
    starts_.clear();
    stops_.clear();
    checkpoints_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::vector<v1::Job> jobs_;
  std::vector<v1::JobEvent> events_;
  std::vector<StartOrder> starts_;
  std::vector<StopOrder> stops_;
  std::vector<CheckpointOrder> checkpoints_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_FAKE_JOB_LISTENER_H_
