#ifndef RINGMASTER_WORKER_RANK_LAUNCHER_H_
#define RINGMASTER_WORKER_RANK_LAUNCHER_H_

// RankLauncher: turns the coordinator's StartRanks / StopRanks orders into
// ProcessSupervisor calls. For each rank it makes the work directory, writes
// the rank's context there, and builds the trainer's command line and
// environment (the contract with ringmaster-trainer, below); once a rank is
// started it has the LogShipper tail its log.
//
// The trainer contract (every rank):
//   argv: <trainer> --rank-context <work-dir>/rank.json
//   rank.json: a ringmaster.v1.RankContext (proto/rank_context.proto) as
//         protobuf JSON, mode 0600 (it holds the rendezvous secret): job,
//         generation, spec, coordinates, world layout, rendezvous
//         (grpc:unix:<agent socket>, secret, deadline), agent
//         (unix:<agent socket>), resume checkpoint, checkpoint directory,
//         device, advertised host
//   cwd:  <state-dir>/jobs/<job>/gen-<g>/rank-<r>/
//   stdout+stderr appended to <state-dir>/jobs/<job>/gen-<g>/rank-<r>.log
//   env:  the worker's environment, then StartRanks.env, then for CUDA ranks
//         CUDA_VISIBLE_DEVICES=<GPU uuid>, CUDA_DEVICE_ORDER=PCI_BUS_ID (the
//         CUDA runtime reads them). No RINGMASTER_* variable: those are only
//         the way to start a rank by hand.
//
// A spec whose data.path lies outside the node's data roots is refused
// (PERMISSION_DENIED, naming the field): the trainer would read any file the
// worker can, its key and join token included.
//
// Thread-safe (the supervisor and shipper are; the launcher keeps no state).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/node_service.pb.h"
#include "worker/log_shipper.h"
#include "worker/process_supervisor.h"

namespace ringmaster::worker {

struct RankLauncherOptions {
  std::string state_dir;     // absolute
  std::string trainer_path;  // absolute
  // Path of the worker's agent socket (without "unix:").
  std::string agent_socket;
  // Host the node's ranks are reachable at (RankContext.advertise_host);
  // empty: not set.
  std::string advertise_host;
  // Directories a job's data.path must lie in (absolute). Empty: every
  // data.path is refused.
  std::vector<std::string> data_roots;
  // The environment ranks inherit ("KEY=VALUE"): normally the worker's own.
  std::vector<std::string> base_env;
  // Grace period of a StopRanks without one.
  absl::Duration default_grace = absl::Seconds(10);
};

class RankLauncher {
 public:
  // `supervisor` must outlive the launcher; `shipper` may be null (no log shipping).
  RankLauncher(ProcessSupervisor* supervisor, LogShipper* shipper, RankLauncherOptions options);

  // Starts the order's ranks; the answer for the coordinator. Ranks that could
  // not even be prepared (bad job id, a rank missing from the placement, an
  // unwritable directory, a data.path outside the data roots) are left out of
  // started_ranks, and error says why; unrecoverable when the order itself is
  // refused (INVALID_ARGUMENT, PERMISSION_DENIED).
  v1::StartRanksResult Start(const v1::StartRanks& order);

  // Stops the order's ranks (see ProcessSupervisor::Stop). Returns how many
  // were signalled.
  int Stop(const v1::StopRanks& order);

  // What Start would run for each rank: makes the directories and writes the
  // rank contexts. INVALID_ARGUMENT for a bad job id, generation, or a rank
  // not in the placement; PERMISSION_DENIED for a data.path outside the data
  // roots; FAILED_PRECONDITION when a file cannot be written.
  absl::StatusOr<std::vector<RankLaunch>> Prepare(const v1::StartRanks& order) const;

 private:
  ProcessSupervisor* const supervisor_;
  LogShipper* const shipper_;
  const RankLauncherOptions options_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_RANK_LAUNCHER_H_
