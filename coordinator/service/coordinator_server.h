#ifndef RINGMASTER_COORDINATOR_COORDINATOR_SERVER_H_
#define RINGMASTER_COORDINATOR_COORDINATOR_SERVER_H_

// CoordinatorServer: the coordinator, assembled. The composition root that
// main() runs (and tests run in-process, on a FakeClock and port 0): it
// builds and wires everything in dependency order,
//
//   Store (<state_dir>/coordinator.db) -> NodeRegistry, CheckpointRegistry
//   (Recover) -> Rendezvous -> CoordinatorMetrics -> DiskReserve (statvfs of
//   state_dir) -> JobController (the Rendezvous' listener) -> LogStore
//   (<state_dir>/logs; the quota, the reserve, the metrics) -> JobWatchers,
//   NodeSessions (the controller's listeners, with the metrics) ->
//   JobController::Recover -> executors -> the four gRPC services, health
//   (SERVING) and reflection -> /metrics (and /healthz) -> the plaintext
//   gRPC health listener (health_listen) -> the ticker (JobController::Tick
//   and NodeSessions::CloseInvalid every tick_interval; a scheduling pass
//   soon after a submission, a registration or a rank exit),
//
// and takes it down in the reverse order (Shutdown).
//
// Thread-safe: Start, Shutdown and the accessors may be called from any
// thread; the accessors' objects live until the destructor.

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/tls.h"
#include "coordinator/core/auth.h"
#include "coordinator/core/job_types.h"
#include "coordinator/store/disk_space.h"

namespace grpc {
class CallbackGenericService;
class Server;
}  // namespace grpc

namespace ringmaster {
class MetricsHttpServer;
}  // namespace ringmaster

namespace ringmaster::coordinator {

class CheckpointRegistry;
class CheckpointService;
class CoordinatorMetrics;
class Executor;
class JobController;
class JobService;
class JobWatchers;
class LogStore;
class NodeRegistry;
class NodeService;
class NodeSessions;
class Accounting;
class Authenticator;
class Rendezvous;
class RendezvousSecrets;
class RendezvousService;
class RpcMetricsInterceptorFactory;
class Store;
class StragglerMetrics;
class Ticker;

struct CoordinatorConfig {
  // gRPC host:port; port 0 picks a free one (port()).
  std::string listen = "127.0.0.1:50051";
  // The database (coordinator.db) and the logs (logs/) live here; created.
  std::string state_dir = "/var/lib/ringmaster/coordinator";
  // host:port of /metrics; empty: no metrics endpoint; port 0: a free one.
  std::string metrics_listen = "127.0.0.1:9464";
  // host:port of a plaintext gRPC listener that serves grpc.health.v1.Health
  // alone (the overall status ""), for probes that cannot present TLS (the
  // kubelet's gRPC probes); empty: none; port 0: a free one.
  std::string health_listen;
  // Workers heartbeat this often; a node's lease is 3 intervals.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // After a restart, how long recovered nodes have to register again before
  // they are lost (NodeRegistryOptions::recovery_grace).
  absl::Duration node_recovery_grace = absl::Seconds(60);
  absl::Duration rendezvous_timeout = absl::Minutes(5);
  absl::Duration stop_grace_period = absl::Seconds(30);
  // A drained node's job that wrote no checkpoint this long after it was
  // asked for one moves all the same, from its newest checkpoint.
  absl::Duration drain_checkpoint_timeout = absl::Minutes(5);
  // Quarantine: a node where ranks of `quarantine.jobs` distinct jobs failed
  // within `quarantine.window` is cordoned (cordoned_by "coordinator").
  QuarantinePolicy quarantine;
  // Stragglers: a rank whose own work per step stays above `factor` x its
  // peers' median for `steps` steps is flagged (StragglerDetector); a job
  // with restart.move_stragglers moves off its node at most once a `move_window`.
  StragglerPolicy stragglers;
  // checkpoint.interval auto: its bounds, the prior MTBF, the window of node
  // failures counted (common/checkpoint_interval.h).
  CheckpointIntervalPolicy checkpoint_interval;
  // The operator's queues file (docs/operations.md); empty: one queue,
  // "default", holding everything. Read again by ReloadQueues (SIGHUP).
  std::string queues_file;
  // A preempted job that wrote no checkpoint this long after it was asked
  // for one is stopped all the same, and resumes from its newest.
  absl::Duration preemption_grace = absl::Minutes(5);
  // Checkpoints of jobs that name no directory; empty: <state_dir>/checkpoints.
  std::string checkpoint_root;
  // Further roots a spec's checkpoint.directory may lie within (absolute).
  std::vector<std::string> checkpoint_allowed_roots;
  // JobSpec.env names jobs may set: "@default", exact names, prefixes
  // ending in '*' (common/env_policy.h).
  std::vector<std::string> allowed_env = {"@default"};
  // Zero: no ticker thread (tests call Tick()).
  absl::Duration tick_interval = absl::Milliseconds(250);
  // Graceful shutdown: calls in flight get this long to finish.
  absl::Duration shutdown_timeout = absl::Seconds(5);
  // StreamLogs -f: how long after the job ends to wait for its last lines.
  absl::Duration log_follow_linger = absl::Seconds(2);
  size_t worker_threads = 4;           // executor of the stream reactors
  // GetNcclUniqueId/KvWait calls parked at once (no thread each); beyond it
  // callers are told to come back after a backoff.
  size_t max_rendezvous_waits = 65536;
  // Finished jobs (with their timeline, checkpoint records and logs) kept;
  // checked every retention_interval by Tick.
  JobRetention job_retention;
  absl::Duration retention_interval = absl::Minutes(1);
  // Disk (docs/deploy.md, "The coordinator's disk"). A job's stored logs
  // hold at most this many bytes (its oldest lines go first); 0: no quota.
  int64_t log_quota_per_job = int64_t{256} << 20;
  // Free space kept on the state directory's filesystem: under it, new log
  // lines are refused (commits and state changes go on).
  DiskReserveOptions disk_reserve;
  // What measures that filesystem (not owned; tests: a FakeDiskSpace);
  // null: statvfs of state_dir.
  const DiskSpace* disk_space = nullptr;

  // Security (docs/security.md, coordinator/auth.h). With TLS (all three
  // files) a token file and a join token file are required; without TLS
  // the listen address must be loopback (or unix:), and the two files are
  // optional (absent: users / workers are not authenticated).
  TlsFiles tls;
  std::string token_file;       // users' bearer tokens (TokenTable format)
  // Who may read a job (auth.h, AuthorizeRead): kTeam, its owner, its
  // queue's members and admins; kOpen, every user.
  Visibility visibility = Visibility::kTeam;
  std::string join_token_file;  // the workers' join token (first line)
};

class CoordinatorServer {
 public:
  // Builds, recovers and starts serving. Errors name what failed, as one
  // line: "cannot open the database /x/coordinator.db: ...", "cannot listen
  // on 127.0.0.1:50051: the address is in use or not local", ...
  // `clock` is not owned; it must outlive the server.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(const CoordinatorConfig& config, Clock* clock);
  ~CoordinatorServer();  // Shutdown()

  // Stops in reverse order: the ticker; health NOT_SERVING; blocked
  // rendezvous waits, sessions and watch/log streams end with UNAVAILABLE;
  // the gRPC server (shutdown_timeout for calls in flight); the executors;
  // /metrics; the health listener (NOT_SERVING until then). The store closes
  // with the destructor. Idempotent.
  void Shutdown();

  // One tick, as the ticker does it (tests with tick_interval zero).
  void Tick();

  // Reads config.queues_file again (SIGHUP). A file that is refused changes
  // nothing: the error (naming the file, field and reason) is returned and
  // the queues in force stay. No file configured: FAILED_PRECONDITION.
  absl::Status ReloadQueues();

  // The gRPC health service that says whether the disk is above its
  // reserve (NOT_SERVING: log lines are refused). The service "" (what the
  // probes check) stays SERVING.
  static constexpr char kDiskHealthService[] = "ringmaster.coordinator.disk";
  // "" when all is well, else a line for /healthz ("disk_low: ...").
  std::string HealthNote();

  int port() const { return port_; }
  int metrics_port() const;
  int health_port() const { return health_port_; }  // 0 without health_listen
  JobController& controller() { return *controller_; }
  NodeRegistry& nodes() { return *nodes_; }
  Rendezvous& rendezvous() { return *rendezvous_; }
  LogStore& logs() { return *logs_; }
  NodeSessions& sessions() { return *sessions_; }
  MetricsRegistry& metrics_registry() { return *registry_; }

 private:
  CoordinatorServer(const CoordinatorConfig& config, Clock* clock);
  absl::Status Build();
  absl::Status Serve();
  absl::Status ServeHealth();  // health_listen's server, if any
  void Poke();

  const CoordinatorConfig config_;
  // The injected clock truncated to whole microseconds, the precision the
  // Store keeps: every time recorded (submit, start, end, events, checkpoint
  // commits) reads the same before and after a restart. Every part uses it.
  const std::unique_ptr<Clock> microsecond_clock_;
  Clock* const clock_;  // microsecond_clock_
  int port_ = 0;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;

  // Loads the TLS material, tokens and rendezvous key; refuses an
  // insecure non-loopback listen address.
  absl::Status BuildSecurity();
  // Measures the disk; on a change of side of the reserve, logs it and sets
  // the health service "ringmaster.coordinator.disk". Tick's thread (and Serve).
  void CheckDisk();
  // Sets the queue usage counters from the store: every tick until the first
  // placement, then at most every 15 s. Tick's thread.
  void RefreshUsageMetrics(absl::Time now);

  // In construction order; destroyed in reverse.
  std::unique_ptr<Store> store_;
  std::unique_ptr<DiskSpace> statvfs_disk_;  // null when the config brings one
  std::unique_ptr<DiskReserve> disk_reserve_;
  std::unique_ptr<TlsMaterial> tls_;  // null: no TLS
  std::unique_ptr<Authenticator> authenticator_;
  std::unique_ptr<RendezvousSecrets> secrets_;
  std::unique_ptr<NodeRegistry> nodes_;
  std::unique_ptr<CheckpointRegistry> checkpoints_;
  std::unique_ptr<Rendezvous> rendezvous_;
  std::unique_ptr<MetricsRegistry> registry_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<StragglerMetrics> straggler_metrics_;  // a listener of controller_, like metrics_
  std::unique_ptr<JobController> controller_;
  std::unique_ptr<Accounting> accounting_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<JobWatchers> watchers_;
  std::unique_ptr<NodeSessions> sessions_;
  std::unique_ptr<Executor> work_;
  std::unique_ptr<JobService> job_service_;
  std::unique_ptr<NodeService> node_service_;
  std::unique_ptr<RendezvousService> rendezvous_service_;
  std::unique_ptr<CheckpointService> checkpoint_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  std::unique_ptr<grpc::CallbackGenericService> health_fallback_;  // health_server_'s other methods
  std::unique_ptr<grpc::Server> health_server_;  // health_listen's; only the Health service
  int health_port_ = 0;
  std::unique_ptr<Ticker> ticker_;
  absl::Time next_retention_ = absl::InfinitePast();  // Tick's thread only
  absl::Time next_usage_refresh_ = absl::InfinitePast();  // Tick's thread only
  std::mutex disk_mu_;  // CheckDisk's state
  bool disk_low_ = false;
  bool disk_measured_ = true;
  size_t disk_health_servers_ = 0;  // servers whose disk health service is set
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_COORDINATOR_SERVER_H_
