#ifndef RINGMASTER_WORKER_RANK_LAUNCHER_H_
#define RINGMASTER_WORKER_RANK_LAUNCHER_H_

// RankLauncher: turns the coordinator's StartRanks / StopRanks orders into
// ProcessSupervisor calls. For each rank it picks the account the job runs
// as (RunAsPolicy), makes the job's private directory and the rank's working
// directory, writes the rank's context there (worker/job_dirs.h), prepares
// the checkpoint directory for that account, and builds the trainer's command
// line and environment (the contract with ringmaster-trainer, below); once a
// rank is started it has the LogShipper tail its log.
//
// The trainer contract (every rank):
//   argv: <trainer> --rank-context <work-dir>/rank.json
//   rank.json: a ringmaster.v1.RankContext (proto/rank_context.proto) as
//         protobuf JSON, mode 0600, the run account's (it holds the
//         rendezvous secret): job, generation, spec, coordinates, world
//         layout, rendezvous (grpc:unix:<agent socket>, secret, deadline),
//         agent (unix:<agent socket>), resume checkpoint, checkpoint
//         directory, device, advertised host
//   user: the job's run account (--run-as: its own groups, no capability,
//         no_new_privs), or the worker's own (--run-as self)
//   cwd:  <state-dir>/ranks/<job>/gen-<g>/rank-<r>/
//   stdout+stderr appended to <state-dir>/jobs/<job>/gen-<g>/rank-<r>.log
//         (opened by the worker; the rank cannot reach the file otherwise;
//         a rank that is an adopted process of an older generation goes on
//         writing to the log it was started with, shipped as the new rank's)
//   rejoin: the built-in trainer on the CPU is started rejoinable
//         (RankLaunch::rejoin_context): after a restart's stop it may wait
//         for the next generation in its process, and a start order adopts
//         it for a rank of this node (worker/process_supervisor.h)
//   env:  built, never inherited from the worker:
//           PATH=/usr/local/bin:/usr/bin:/bin, then the node's (LANG and
//             LC_ALL as the worker has them, the operator's --rank-env),
//           the spec's env (the coordinator checked it: common/env_policy.h),
//             then StartRanks.env,
//           then what the worker owns: HOME, USER, LOGNAME of the run
//             account, TMPDIR=<state-dir>/ranks/<job>/tmp, and for CUDA ranks
//             CUDA_VISIBLE_DEVICES=<GPU uuid>, CUDA_DEVICE_ORDER=PCI_BUS_ID.
//         No RINGMASTER_* variable: those are only the way to start a rank
//         by hand.
//
// A spec or order env name this worker's --allowed-env does not admit is
// refused (INVALID_ARGUMENT naming env.<NAME>), as the coordinator refused it
// at Submit: a job stored before the list changed cannot slip one through.
// A spec whose data.path lies outside the node's data roots is refused
// (PERMISSION_DENIED, naming the field): the trainer would read any file the
// worker can, its key and join token included. So is a job whose owner has no
// account here (--run-as owner).
//
// Thread-safe (the supervisor and shipper are; the launcher keeps no state).

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/node_service.pb.h"
#include "worker/job_dirs.h"
#include "worker/log_shipper.h"
#include "worker/process_supervisor.h"
#include "worker/run_as.h"

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
  // The node's part of every rank's environment ("KEY=VALUE", NodeRankEnv):
  // on top of the minimal one, under the job's.
  std::vector<std::string> node_env;
  // The worker's --allowed-env (common/env_policy.h): every name of the
  // spec's and the order's env is checked again against it before a rank
  // starts; "*" admits what the coordinator did, except a variable that loads
  // code or names a path, which must be named here too. Must be valid
  // (EnvPolicy::Create; main checks the flag).
  std::vector<std::string> allowed_env = {"*"};
  // Which account each job's ranks run as.
  RunAsPolicy run_as = RunAsPolicy::Self();
  // Grace period of a StopRanks without one.
  absl::Duration default_grace = absl::Seconds(10);
  // The directory holding the Python SDK's `ringmaster` package, put first
  // on a program job's PYTHONPATH; empty: none.
  std::string python_sdk_dir;
};

// PATH of every rank unless the operator's --rank-env sets another.
inline constexpr char kRankPath[] = "/usr/local/bin:/usr/bin:/bin";

// The node's part of the ranks' environment: LANG and LC_ALL as in
// `worker_env` (the worker's own "KEY=VALUE" list), then each of the
// operator's --rank-env entries: NAME=VALUE sets it; NAME passes the
// worker's own value (if it has one); PREFIX* passes each of the worker's
// variables that starts with PREFIX. INVALID_ARGUMENT naming the entry for a
// variable the worker owns (common/env_policy.h IsWorkerOwnedEnv) or a
// malformed one.
absl::StatusOr<std::vector<std::string>> NodeRankEnv(const std::vector<std::string>& rank_env_flags,
                                                     const std::vector<std::string>& worker_env);

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
  // rank contexts. INVALID_ARGUMENT for a bad job id, generation, a rank
  // not in the placement, or an env name --allowed-env refuses; PERMISSION_DENIED for a data.path outside the data
  // roots, an owner with no account here, or a link planted where a job
  // directory should be; FAILED_PRECONDITION when a file cannot be written.
  absl::StatusOr<std::vector<RankLaunch>> Prepare(const v1::StartRanks& order) const;

 private:
  // The one place that decides what a rank runs: the built-in trainer
  // (argv <trainer> --rank-context <rank.json>, in the rank's directory) or
  // the job's program (its command, resolved in the rank's PATH, in its
  // working_dir, with torchrun's variables added to `env`).
  absl::Status DecideCommand(const v1::StartRanks& order, const v1::RankAssignment& rank, const RankFiles& files,
                             std::map<std::string, std::string>* env, SpawnRequest* process) const;

  ProcessSupervisor* const supervisor_;
  LogShipper* const shipper_;
  const RankLauncherOptions options_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_RANK_LAUNCHER_H_
