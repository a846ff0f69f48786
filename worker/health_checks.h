#ifndef RINGMASTER_WORKER_HEALTH_CHECKS_H_
#define RINGMASTER_WORKER_HEALTH_CHECKS_H_

// HealthChecks: whether this node is fit to run ranks (worker/README.md,
// "Health checks"). In order, the first that fails is the node's reason to be
// NOT_READY (Heartbeat.health_failure), as one line:
//   - free space: each of disk_paths (the state directory, --health-disk
//     paths such as the checkpoint filesystems) has at least min_free_bytes
//     available to unprivileged users;
//   - data roots: with require_data_roots, each of data_roots is a directory;
//   - GPUs: on a node that registered GPUs, `gpu`'s checks (GpuHealth in
//     worker/gpu_health.h: count, XID, ECC, NVLink through NVML);
//   - scripts: each operator script (--health-check) exits 0 within
//     script_timeout; otherwise the reason is its first output line (stdout
//     and stderr together), or how it ended when it printed nothing.
//
// Run() runs every check now (a script for up to script_timeout each, in
// real time, its process group killed after); Start() runs them every
// `interval` (the injected clock) on a thread of its own.
// CheckBeforePlacement is cheap: the file-system checks and the GPU count
// again, now, and the latest GPU and scripts' results. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ringmaster::worker {

// The GPUs' checks (GpuHealth; a fake in tests). Each returns "" (fit) or
// the reason, naming the GPU. Thread-safe.
class GpuCheck {
 public:
  virtual ~GpuCheck() = default;
  virtual std::string Check() = 0;       // every check: run each interval
  virtual std::string CheckCount() = 0;  // cheap: before each placement
};

struct HealthCheckOptions {
  std::vector<std::string> disk_paths;
  int64_t min_free_bytes = int64_t{256} << 20;  // <= 0: no free-space check
  std::vector<std::string> data_roots;
  bool require_data_roots = false;
  std::vector<std::string> scripts;  // executables, run without arguments
  absl::Duration script_timeout = absl::Seconds(10);
  absl::Duration interval = absl::Seconds(30);
  // Where the scripts' output goes while they run (created); must be set
  // when there are scripts.
  std::string output_dir;
  std::shared_ptr<GpuCheck> gpu;  // null: no GPU checks
};

// Bytes available to unprivileged users on the file system holding `path`
// (statvfs). FAILED_PRECONDITION naming the path when it cannot be examined.
absl::StatusOr<int64_t> AvailableBytes(const std::string& path);

class HealthChecks {
 public:
  using FreeSpace = std::function<absl::StatusOr<int64_t>(const std::string& path)>;

  // `clock` must outlive this; `free_space` is injected for tests.
  HealthChecks(HealthCheckOptions options, Clock* clock, FreeSpace free_space = AvailableBytes);
  ~HealthChecks();  // Stop()
  HealthChecks(const HealthChecks&) = delete;
  HealthChecks& operator=(const HealthChecks&) = delete;

  // Runs every check now; returns the first failure ("": all pass), which
  // Failure() returns from then on.
  std::string Run();
  // The latest Run()'s result ("" before any).
  std::string Failure() const;
  // Before a placement: the file-system checks now, `extra_paths`' free space
  // too (an order's checkpoint roots; one that does not exist here is
  // skipped), the GPU count now, else the latest GPU and scripts' results.
  // "": fit. A failure found here now is Failure() until the next Run().
  std::string CheckBeforePlacement(const std::vector<std::string>& extra_paths = {});

  // Runs the checks every interval, the first one interval from now (call
  // Run() first for a result at once), until Stop, which waits for a Run in
  // progress (up to script_timeout per script). Idempotent.
  void Start();
  void Stop();

 private:
  std::string CheckFileSystems(const std::vector<std::string>& extra_paths) const;
  std::string CheckScripts() const;
  // The reason `script` fails ("" when it passes).
  std::string RunScript(const std::string& script, int index) const;
  void Loop();

  const HealthCheckOptions options_;
  Clock* const clock_;
  const FreeSpace free_space_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string failure_;          // the latest Run()'s
  std::string scripts_failure_;  // the latest scripts' result
  std::string gpu_failure_;      // the latest GPU checks' result
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_HEALTH_CHECKS_H_
