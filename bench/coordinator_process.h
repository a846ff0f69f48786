#ifndef RINGMASTER_BENCH_COORDINATOR_PROCESS_H_
#define RINGMASTER_BENCH_COORDINATOR_PROCESS_H_

// CoordinatorProcess: a real `ringmaster-coordinator` run for a benchmark, on
// a free loopback port, with its own temporary state directory (its log in
// <dir>/coordinator.log). Stop() (and the destructor) sends SIGTERM, waits for
// a graceful exit, then SIGKILLs and reaps; the directory is removed unless
// kept.
//
// Not thread-safe: one owner.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ringmaster::bench {

struct CoordinatorProcessOptions {
  std::string binary;                     // path of ringmaster-coordinator
  std::vector<std::string> extra_args;    // appended after --listen/--state-dir/--metrics-listen
  absl::Duration start_timeout = absl::Seconds(15);
  absl::Duration stop_timeout = absl::Seconds(15);  // SIGTERM -> SIGKILL
  bool keep_state = false;                // leave the temporary directory
};

// Memory of a process from /proc/<pid>/status, in bytes (-1: unreadable).
struct ProcessMemory {
  int64_t vm_hwm = -1;  // peak resident set
  int64_t vm_rss = -1;  // resident set now
  int threads = -1;
};
ProcessMemory ReadProcessMemory(pid_t pid);

class CoordinatorProcess {
 public:
  // Starts the binary and waits until its gRPC port accepts a connection.
  // UNAVAILABLE (with the log's tail) if it exits or does not come up in time.
  // The child is killed (SIGKILL) when the calling thread ends, so call it
  // from the main thread: a benchmark that is killed leaves no coordinator.
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Start(const CoordinatorProcessOptions& options);
  ~CoordinatorProcess();  // Stop()
  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  // SIGTERM, wait (stop_timeout), SIGKILL; reaps. Returns the exit status as
  // waitpid's "exited N" / "killed by signal N". Idempotent.
  std::string Stop();

  const std::string& address() const { return address_; }  // "127.0.0.1:<port>"
  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  // The last `lines` lines of the coordinator's log.
  std::string LogTail(int lines) const;

 private:
  CoordinatorProcess() = default;

  CoordinatorProcessOptions options_;
  std::string dir_;
  std::string address_;
  pid_t pid_ = -1;
  std::string stop_status_;
};

}  // namespace ringmaster::bench

#endif  // RINGMASTER_BENCH_COORDINATOR_PROCESS_H_
