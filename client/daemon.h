#ifndef RINGMASTER_CLIENT_DAEMON_H_
#define RINGMASTER_CLIENT_DAEMON_H_

// Background processes for `ringmaster local`: started in their own session
// (setsid, so they outlive the CLI and its terminal), stdin from /dev/null,
// stdout and stderr appended to a log file, and recorded in a pid file
//
//   <pid> <start time>\n
//
// where the start time is field 22 of /proc/<pid>/stat, so that a pid reused
// by another process after a crash is not mistaken for the daemon.
// Stopping signals the daemon's process group (the session it leads).
// Thread-compatible.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ringmaster::client {

struct DaemonSpec {
  std::string binary;  // absolute path, executed as is
  std::vector<std::string> args;  // without argv[0]
  std::string pid_file;
  std::string log_file;
};

// A daemon as its pid file describes it.
struct DaemonState {
  bool pid_file_exists = false;
  pid_t pid = 0;
  // The recorded process still runs (same start time, not a zombie).
  bool running = false;
};

// Spawns the daemon and writes its pid file. The child is this process's
// child until this process exits. Errors: the binary cannot be executed
// (naming it), the pid or log file cannot be written.
absl::StatusOr<pid_t> StartDaemon(const DaemonSpec& spec);

// What `pid_file` records and whether that process runs.
DaemonState ReadDaemon(const std::string& pid_file);

// Whether `pid` runs and is not a zombie; with `start_time`, also that it is
// the same process.
bool ProcessRunning(pid_t pid, std::optional<uint64_t> start_time = std::nullopt);

// For a child of this process that has exited: how it ended ("exited with
// status 1", "was killed by signal 9"), reaping it. nullopt while it runs,
// or if it is not our child.
std::optional<std::string> ReapIfExited(pid_t pid);

// SIGTERM to the daemon's process group, then SIGKILL if it still runs after
// `grace`; removes the pid file (also a stale one). Returns the state it found.
absl::StatusOr<DaemonState> StopDaemon(const std::string& pid_file, absl::Duration grace, Clock* clock);

// The last non-empty line of a (log) file, skipping CLI11's "Run with --help
// for more information." after a flag error; empty if none.
std::string LastLine(const std::string& path);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_DAEMON_H_
