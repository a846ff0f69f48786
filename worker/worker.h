#ifndef RINGMASTER_WORKER_WORKER_H_
#define RINGMASTER_WORKER_WORKER_H_

// Worker: the node agent, assembled. The composition root that main() runs
// (main parses the flags and the environment into a WorkerConfig and handles
// the signals). Start prepares the node, then builds and wires everything in
// dependency order,
//
//   the run-as policy (when ranks run as other accounts: umask 077, the
//   memlock limit raised) -> the state directory (created, 0700/0711,
//   worker.lock) -> TLS material, join token -> the trainer binary ->
//   NodeInfo (GPUs or CPU slots, labels) -> WorkerMetrics and /metrics ->
//   RealProcessControl, LogShipper -> ProcessSupervisor (each exit goes to
//   the shipper, the metrics and the session) -> RankLauncher ->
//   NodeCredential -> the coordinator channel (shared by the session, the
//   pusher and the agent's forwarding) -> HealthChecks (run once) ->
//   CoordinatorSession -> AgentServer
//   (agent.sock) -> LogPusher -> the two JobDirJanitors (jobs/, ranks/),
//
// then starts the shipper, the pusher, the session, the janitors and the
// periodic health checks, in that order. Shutdown takes it down in the reverse order: every rank stopped
// (SIGTERM, SIGKILL after stop_grace_period) with its exit reported to the
// session, the janitors, the agent socket, the shipper closed and what it
// holds pushed (2 s), the queued exit reports delivered (5 s) and the session
// closed, /metrics.
//
// Thread-safe: RequestDrain, Shutdown and the accessors may be called from
// any thread. Threads: see worker/README.md.

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/tls.h"
#include "proto/node.pb.h"
#include "worker/run_as.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace ringmaster {
class MetricsHttpServer;
}  // namespace ringmaster

namespace ringmaster::worker {

class AgentServer;
class CoordinatorSession;
class GpuCheck;
class HealthChecks;
class JobDirJanitor;
class LogPusher;
class LogShipper;
class NodeCredential;
class ProcessSupervisor;
class RankLauncher;
class RealProcessControl;
class WorkerMetrics;

// The flags of ringmaster-worker (worker/README.md, "Flags"), typed.
struct WorkerConfig {
  std::string coordinator = "127.0.0.1:50051";
  int cpu_slots = 0;  // 0: none on a GPU node, one per CPU otherwise
  std::string state_dir = "/var/lib/ringmaster/worker";
  std::string listen_address;  // advertised to peers; empty: the node name
  std::string node_name;       // empty: the hostname
  // host:port of /metrics; port 0: any free port (logged); empty: none.
  std::string metrics_listen = "127.0.0.1:0";
  std::string trainer;  // empty: FindTrainer's search (worker/paths.h)
  std::string python_sdk;  // empty: FindPythonSdk's search (worker/paths.h)
  absl::Duration heartbeat_interval = absl::ZeroDuration();  // zero: the coordinator's
  absl::Duration stop_grace_period = absl::Seconds(10);
  absl::Duration state_dump_wait = absl::Seconds(2);
  absl::Duration reconnect_initial = absl::Milliseconds(500);
  absl::Duration reconnect_max = absl::Seconds(30);
  std::vector<std::string> labels;  // KEY=VALUE
  // Where jobs' data.path may point (RankLauncherOptions::data_roots); absolute.
  std::vector<std::string> data_roots = {"/usr/share/datasets", "/usr/local/share/ringmaster",
                                         "/var/lib/ringmaster/datasets"};
  TlsFiles tls;
  std::string join_token_file;
  // Finished jobs' directories kept (JobDirJanitor).
  double job_retention_days = 7;
  int job_retention_count = 200;
  // Which account ranks run as (worker/run_as.h); "": the worker decides.
  std::string run_as;
  std::string run_as_map;
  // The node's variables for every rank (NodeRankEnv).
  std::vector<std::string> rank_env;
  std::vector<std::string> allowed_env = {"*"};
  // Health checks (worker/health_checks.h): while one fails the node is
  // NOT_READY. Free space on the state directory and on health_disks.
  int64_t health_min_free_mb = 256;  // 0: no free-space check
  std::vector<std::string> health_disks;
  bool require_data_roots = false;  // each --data-roots directory must exist
  std::vector<std::string> health_checks;  // operators' scripts (absolute paths)
  absl::Duration health_check_timeout = absl::Seconds(10);
  absl::Duration health_interval = absl::Seconds(30);
  // On a node with GPUs: their count, XID, ECC and NVLink through NVML
  // (worker/gpu_health.h); skipped, with a warning, where NVML cannot load.
  bool health_gpu = true;
  // The worker's own environment ("NAME=VALUE"), read by main: --rank-env
  // takes values from it, PATH finds the trainer. Ranks never inherit it.
  std::vector<std::string> environment;
};

class Worker {
 public:
  // Prepares the node, builds everything and starts it. Errors are one line
  // naming the flag or path and the reason ("another worker uses DIR ...",
  // "--data-roots: x is not an absolute path"); nothing is left running.
  // `clock` is not owned and must outlive the worker.
  static absl::StatusOr<std::unique_ptr<Worker>> Start(const WorkerConfig& config, Clock* clock);
  ~Worker();  // Shutdown()
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Asks the coordinator to drain this node (SIGUSR1): its jobs checkpoint
  // and move to other nodes, and nothing new is placed here.
  void RequestDrain(const std::string& reason);
  // See above. Idempotent.
  void Shutdown();

  int running_ranks() const;
  // host:port /metrics is served on; "" without one.
  std::string metrics_address() const;

 private:
  Worker(const WorkerConfig& config, Clock* clock);
  // Run-as, the state directory, TLS, the join token, the trainer, NodeInfo.
  absl::Status Prepare();
  absl::Status BuildMetrics();
  absl::Status BuildRanks();  // control, shipper, supervisor, launcher
  absl::Status BuildHealthChecks();
  // NVML's checks of node_'s GPUs; null (logged) where NVML cannot load.
  std::shared_ptr<GpuCheck> OpenGpuHealth() const;
  absl::Status BuildCoordinatorLink();  // session, agent, pusher
  void BuildJanitors();
  void LogStartup() const;

  const WorkerConfig config_;
  Clock* const clock_;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;

  // Prepared.
  std::string state_dir_;  // absolute
  std::optional<RunAsPolicy> run_as_;
  bool other_accounts_ = false;
  std::unique_ptr<TlsMaterial> tls_;
  std::string join_token_;
  std::string trainer_;
  std::string python_sdk_;  // "" : none
  std::string address_;
  std::string advertise_host_;
  v1::NodeInfo node_;

  // Built, in this order; destroyed in the reverse one.
  MetricsRegistry registry_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<MetricsHttpServer> metrics_server_;
  std::unique_ptr<RealProcessControl> control_;
  std::unique_ptr<LogShipper> shipper_;
  std::unique_ptr<ProcessSupervisor> supervisor_;
  std::unique_ptr<RankLauncher> launcher_;
  std::unique_ptr<NodeCredential> credential_;  // outlives the channel, which sends it
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<HealthChecks> health_;  // outlives the session, which asks it
  // Set before any rank can start (ranks start on the session's orders).
  std::unique_ptr<CoordinatorSession> session_;
  std::unique_ptr<AgentServer> agent_;
  std::unique_ptr<LogPusher> pusher_;
  std::unique_ptr<JobDirJanitor> janitor_;
  std::unique_ptr<JobDirJanitor> ranks_janitor_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_WORKER_H_
