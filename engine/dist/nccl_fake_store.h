#ifndef RINGMASTER_ENGINE_DIST_NCCL_FAKE_STORE_H_
#define RINGMASTER_ENGINE_DIST_NCCL_FAKE_STORE_H_

// testing::FakeStore: an in-memory Store for the NCCL tests (one process; the
// ranks are threads). Get and Wait block on a condition variable until the
// key is set or the timeout passes. Records the keys that were Set. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "engine/dist/store.h"

namespace ringmaster::engine::dist::testing {

class FakeStore : public Store {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
    set_keys_.push_back(key);
    cv_.notify_all();
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return values_.count(key) > 0; })) {
      return absl::DeadlineExceededError(
          absl::StrCat("key ", key, " not set within ", absl::FormatDuration(timeout)));
    }
    return values_[key];
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t value = values_.count(key) ? std::stoll(values_[key]) : 0;
    value += delta;
    values_[key] = std::to_string(value);
    cv_.notify_all();
    return value;
  }

  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto all_set = [&] {
      for (const std::string& key : keys) {
        if (values_.count(key) == 0) return false;
      }
      return true;
    };
    if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), all_set)) {
      std::vector<std::string> missing;
      for (const std::string& key : keys) {
        if (values_.count(key) == 0) missing.push_back(key);
      }
      return absl::DeadlineExceededError(absl::StrCat("keys not set: ", absl::StrJoin(missing, ", ")));
    }
    return absl::OkStatus();
  }

  // Every key Set so far, in order.
  std::vector<std::string> set_keys() const {
    std::lock_guard<std::mutex> lock(mu_);
    return set_keys_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> set_keys_;
};

}  // namespace ringmaster::engine::dist::testing

#endif  // RINGMASTER_ENGINE_DIST_NCCL_FAKE_STORE_H_
