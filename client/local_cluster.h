#ifndef RINGMASTER_CLIENT_LOCAL_CLUSTER_H_
#define RINGMASTER_CLIENT_LOCAL_CLUSTER_H_

// `ringmaster local up|down|status`: a coordinator and a worker on this
// machine, as background daemons (client/daemon.h) under a state directory:
//
//   DIR/coordinator.pid  DIR/coordinator.log  DIR/coordinator/  (its --state-dir)
//   DIR/worker.pid       DIR/worker.log       DIR/worker/       (its --state-dir)
//
// They are started as
//   ringmaster-coordinator --listen ADDR --state-dir DIR/coordinator --metrics-listen M
//   ringmaster-worker --coordinator ADDR --cpu-slots N --state-dir DIR/worker
//       --listen-address 127.0.0.1 --metrics-listen W [--data-roots R1,R2]
// where ADDR is the CLI's --coordinator address, which must be on this
// machine (127.0.0.1:PORT, localhost:PORT or [::1]:PORT). M is
// LocalOptions::metrics_listen and W the same host with port 0 (both "" when
// it is empty), so that clusters with different ADDRs run side by side.
//
// up: starts whichever is not running; waits (startup_timeout) until the
//   coordinator answers gRPC health checking with SERVING and then until the
//   worker's node is READY in ListNodes; if either fails, stops what it
//   started and reports the daemon's last log line. Idempotent.
// down: SIGTERM to the worker, then the coordinator (SIGKILL after
//   stop_grace); removes the pid files. Succeeds when nothing runs.
// status: each daemon (running, pid, address, log), whether the coordinator
//   is SERVING, and its nodes. kExitError (one line on stderr) unless both run
//   and the coordinator serves.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "common/clock.h"

namespace ringmaster::client {

struct LocalOptions {
  // Default (resolved by main): $XDG_STATE_HOME/ringmaster/local, or
  // ~/.local/state/ringmaster/local.
  std::string state_dir;
  // Where ringmaster-coordinator and ringmaster-worker are; empty: next to
  // the CLI (self_exe's directory), or in a bazel-bin layout
  // (../coordinator/ringmaster-coordinator, ../worker/ringmaster-worker).
  std::string bin_dir;
  std::string self_exe;  // the CLI's own path (/proc/self/exe)
  int cpu_slots = 1;     // the worker's --cpu-slots
  // The coordinator's /metrics address; port 0: any free port (its log
  // names it); empty: no /metrics on either daemon.
  std::string metrics_listen = "127.0.0.1:0";
  // The worker's --data-roots (where data.path may point); empty: its default.
  std::vector<std::string> data_roots;
  absl::Duration startup_timeout = absl::Seconds(30);
  absl::Duration stop_grace = absl::Seconds(10);
  Clock* clock = Clock::Real();  // paces polling
};

int RunLocalUp(const GlobalOptions& global, const LocalOptions& options, Console& console);
int RunLocalDown(const GlobalOptions& global, const LocalOptions& options, Console& console);
int RunLocalStatus(const GlobalOptions& global, const LocalOptions& options, Console& console);

// The first of the candidate paths (see LocalOptions::bin_dir) that is an
// executable file; NOT_FOUND listing the paths tried otherwise.
absl::StatusOr<std::string> FindDaemonBinary(const LocalOptions& options, const std::string& component,
                                             const std::string& name);

// `coordinator` if its host is a loopback name or address; INVALID_ARGUMENT
// otherwise.
absl::StatusOr<std::string> LocalListenAddress(const std::string& coordinator);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_LOCAL_CLUSTER_H_
