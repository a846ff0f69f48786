#ifndef RINGMASTER_WORKER_TESTING_FAKE_PROCESS_CONTROL_H_
#define RINGMASTER_WORKER_TESTING_FAKE_PROCESS_CONTROL_H_

// FakeProcessControl: processes that exist only in memory, for the
// supervisor's unit tests. It records every Spawn and SignalGroup; a test ends
// a "process" with Exit(). A process group dies on SIGKILL, and on SIGTERM
// unless the test made it ignore SIGTERM. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/process_control.h"

namespace ringmaster::worker {

class FakeProcessControl : public ProcessControl {
 public:
  struct Signal {
    int64_t pgid;
    int sig;
  };

  absl::StatusOr<int64_t> Spawn(const SpawnRequest& request) override;
  absl::Status SignalGroup(int64_t pgid, int sig) override;
  std::optional<ProcessExit> WaitAny(absl::Duration timeout) override;
  void Interrupt() override;

  // The next Spawn fails with `status` (once).
  void FailNextSpawn(absl::Status status);
  // Processes started from now on ignore SIGTERM (only SIGKILL ends them).
  void IgnoreSigterm(bool ignore);
  // Ends a live process as if it exited with `exit_code` (or was killed by
  // `signal` when non-zero). No-op for an unknown or dead pid.
  void Exit(int64_t pid, int exit_code, int signal = 0);

  std::vector<SpawnRequest> spawned() const;
  std::vector<Signal> signals() const;
  // Live (not yet exited) pids.
  std::set<int64_t> live() const;
  // The pid Spawn returned for rank `rank` of generation `generation`: its
  // working directory is the launcher's .../gen-<g>/rank-<r>, or (a test's
  // own launches) its env has RINGMASTER_RANK and RINGMASTER_GENERATION; most
  // recent first; 0 if none.
  int64_t PidOf(int32_t rank, int64_t generation) const;
  // Blocks until `pred` holds (checked whenever something changes) or
  // `timeout` passes; returns pred's last value. For tests that wait on the
  // supervisor's thread.
  bool WaitFor(const std::function<bool()>& pred, absl::Duration timeout);

 private:
  struct Process {
    SpawnRequest request;
    bool ignores_sigterm = false;
  };
  void EndLocked(int64_t pid, int exit_code, int signal);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_pid_ = 1000;
  std::map<int64_t, Process> live_;
  std::deque<ProcessExit> exits_;  // ended, not yet returned by WaitAny
  std::vector<SpawnRequest> spawned_;
  std::vector<Signal> signals_;
  std::map<int64_t, SpawnRequest> by_pid_;
  std::optional<absl::Status> fail_next_;
  bool ignore_sigterm_ = false;
  bool interrupted_ = false;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_TESTING_FAKE_PROCESS_CONTROL_H_
