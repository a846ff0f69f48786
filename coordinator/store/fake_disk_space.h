#ifndef RINGMASTER_COORDINATOR_STORE_FAKE_DISK_SPACE_H_
#define RINGMASTER_COORDINATOR_STORE_FAKE_DISK_SPACE_H_

// FakeDiskSpace: a DiskSpace whose free and total bytes the test sets (and
// whose measurement it can make fail). Thread-safe. Test-only.

#include <cstdint>
#include <mutex>
#include <string>

#include "coordinator/store/disk_space.h"

namespace ringmaster::coordinator {

class FakeDiskSpace final : public DiskSpace {
 public:
  explicit FakeDiskSpace(int64_t free_bytes = int64_t{100} << 30, int64_t total_bytes = int64_t{200} << 30,
                         std::string path = "/fake-disk")
      : path_(std::move(path)), free_(free_bytes), total_(total_bytes) {}

  void Set(int64_t free_bytes, int64_t total_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    free_ = free_bytes;
    total_ = total_bytes;
  }
  void SetFree(int64_t free_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    free_ = free_bytes;
  }
  void Fail(absl::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(status);
  }
  int measurements() const {
    std::lock_guard<std::mutex> lock(mu_);
    return measurements_;
  }

  absl::StatusOr<DiskUsage> Measure() const override {
    std::lock_guard<std::mutex> lock(mu_);
    ++measurements_;
    if (!error_.ok()) return error_;
    return DiskUsage{free_, total_};
  }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  mutable std::mutex mu_;
  int64_t free_;
  int64_t total_;
  absl::Status error_;
  mutable int measurements_ = 0;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_STORE_FAKE_DISK_SPACE_H_
