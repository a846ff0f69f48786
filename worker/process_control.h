#ifndef RINGMASTER_WORKER_PROCESS_CONTROL_H_
#define RINGMASTER_WORKER_PROCESS_CONTROL_H_

// ProcessControl: the operating-system calls the ProcessSupervisor makes
// (start a process, signal a process group, reap), behind an interface so that
// the supervisor's logic is tested with FakeProcessControl and its real
// behaviour with RealProcessControl on /bin/sh scripts.

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"

namespace ringmaster::worker {

struct SpawnRequest {
  // Absolute path of the executable.
  std::string path;
  // argv, argv[0] included.
  std::vector<std::string> argv;
  // The whole environment, "KEY=VALUE" each (nothing is inherited).
  std::vector<std::string> env;
  // Working directory; created (with its parents) if missing.
  std::string cwd;
  // stdout and stderr are appended to this file; created (with its parent
  // directories) if missing, by the worker, and inherited by the process as
  // its descriptors 1 and 2. stdin is /dev/null.
  std::string log_path;
  // Run as this account (nullopt: as the worker). The process then gets
  // exactly the account's groups, no capability and no_new_privs
  // (common/subprocess.h); `cwd` must exist (it is the account's, and the
  // worker does not make it).
  std::optional<SpawnOptions::Credentials> credentials;
};

// How a child ended.
struct ProcessExit {
  int64_t pid = 0;
  // The exit status; -1 when a signal killed it.
  int exit_code = -1;
  // The signal that killed it; 0 when it exited.
  int signal = 0;
};

// Thread-safe: every method may be called from any thread.
class ProcessControl {
 public:
  virtual ~ProcessControl() = default;

  // Starts a child as the leader of a new process group (its pgid is its
  // pid) that gets SIGKILL when the worker dies (PR_SET_PDEATHSIG), with
  // signals unblocked and at their default actions. Returns its pid.
  // INVALID_ARGUMENT for an empty path or argv; FAILED_PRECONDITION when the
  // program cannot be run (missing, not executable: the exec's errno) or a
  // directory or the log file cannot be made; UNAVAILABLE when fork fails for
  // lack of resources (retry later).
  virtual absl::StatusOr<int64_t> Spawn(const SpawnRequest& request) = 0;

  // Sends `sig` to every process of the group `pgid`. OK when the group has
  // no process left (ESRCH): it is already gone.
  virtual absl::Status SignalGroup(int64_t pgid, int sig) = 0;

  // Waits at most `timeout` for a child started by Spawn to end, reaps it and
  // returns how it ended; nullopt when none ended in time or Interrupt() was
  // called. Children not started by Spawn are never reaped here.
  virtual std::optional<ProcessExit> WaitAny(absl::Duration timeout) = 0;

  // Makes a WaitAny in progress (or the next one) return at once.
  virtual void Interrupt() = 0;
};

// fork/exec/kill/waitpid. Children are forked from one long-lived thread that
// this object owns: PR_SET_PDEATHSIG fires when the *thread* that forked a
// child ends, so forking from a short-lived thread (a gRPC stream reader)
// would kill the child with it. WaitAny polls the children it started with
// waitpid(pid, WNOHANG) every `poll_interval` (it never calls waitpid(-1), so
// children of other parts of the process are left alone).
// Thread-safe. Destroying it does not stop the children (the supervisor does).
class RealProcessControl : public ProcessControl {
 public:
  explicit RealProcessControl(absl::Duration poll_interval = absl::Milliseconds(10));
  ~RealProcessControl() override;
  RealProcessControl(const RealProcessControl&) = delete;
  RealProcessControl& operator=(const RealProcessControl&) = delete;

  absl::StatusOr<int64_t> Spawn(const SpawnRequest& request) override;
  absl::Status SignalGroup(int64_t pgid, int sig) override;
  std::optional<ProcessExit> WaitAny(absl::Duration timeout) override;
  void Interrupt() override;

 private:
  struct SpawnJob {
    const SpawnRequest* request;
    absl::StatusOr<int64_t> result = absl::UnknownError("not run");
    bool done = false;
  };
  void SpawnerLoop();
  absl::StatusOr<int64_t> DoSpawn(const SpawnRequest& request);

  const absl::Duration poll_interval_;
  std::mutex mu_;
  std::condition_variable spawn_cv_;  // spawn_queue_ changed or a job is done
  std::condition_variable wait_cv_;   // a child was added, or Interrupt()
  std::deque<SpawnJob*> spawn_queue_;
  bool closing_ = false;
  std::set<pid_t> children_;  // started and not yet reaped
  bool interrupted_ = false;
  std::thread spawner_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_PROCESS_CONTROL_H_
