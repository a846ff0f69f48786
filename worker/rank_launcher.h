#ifndef RINGMASTER_WORKER_RANK_LAUNCHER_H_
#define RINGMASTER_WORKER_RANK_LAUNCHER_H_

// RankLauncher: turns the coordinator's StartRanks / StopRanks orders into
// ProcessSupervisor calls. For each rank it makes the work directory, writes
// the job spec there as JSON, and builds the trainer's command line and
// environment (the contract with ringmaster-trainer, below); once a rank is
// started it has the LogShipper tail its log.
//
// The trainer contract (every rank):
//   argv: <trainer> --spec <work-dir>/spec.json [--checkpoint-dir <StartRanks.checkpoint_dir>]
//   cwd:  <state-dir>/jobs/<job>/gen-<g>/rank-<r>/
//   stdout+stderr appended to <state-dir>/jobs/<job>/gen-<g>/rank-<r>.log
//   env:  the worker's environment, then StartRanks.env, then (these win):
//     RINGMASTER_RANK, RINGMASTER_WORLD_SIZE, RINGMASTER_LOCAL_RANK,
//     RINGMASTER_NODE_RANK, RINGMASTER_DATA_RANK, RINGMASTER_PIPELINE_RANK
//     RINGMASTER_JOB_ID, RINGMASTER_GENERATION
//     RINGMASTER_RENDEZVOUS=grpc:unix:<agent socket>
//     RINGMASTER_RENDEZVOUS_PREFIX=<job>/<generation>
//     RINGMASTER_AGENT=unix:<agent socket>      (AgentService, CheckpointService)
//     RINGMASTER_HOST=<advertised host>          when the worker knows it (Gloo binds there)
//     RINGMASTER_RENDEZVOUS_DEADLINE=<RFC 3339>  when the order has one
//     RINGMASTER_RESUME_FROM=<dir>, RINGMASTER_RESUME_STEP=<step>  when resuming
//     CUDA_VISIBLE_DEVICES=<GPU uuid>, CUDA_DEVICE_ORDER=PCI_BUS_ID  for CUDA ranks
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
  // Host the node's ranks are reachable at (RINGMASTER_HOST); empty: not set.
  std::string advertise_host;
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
  // unwritable directory) are left out of started_ranks, and error says why.
  v1::StartRanksResult Start(const v1::StartRanks& order);

  // Stops the order's ranks (see ProcessSupervisor::Stop). Returns how many
  // were signalled.
  int Stop(const v1::StopRanks& order);

  // What Start would run for each rank: makes the directories and writes the
  // spec files. INVALID_ARGUMENT for a bad job id, generation, or a rank not
  // in the placement; FAILED_PRECONDITION when a file cannot be written.
  absl::StatusOr<std::vector<RankLaunch>> Prepare(const v1::StartRanks& order) const;

 private:
  ProcessSupervisor* const supervisor_;
  LogShipper* const shipper_;
  const RankLauncherOptions options_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_RANK_LAUNCHER_H_
