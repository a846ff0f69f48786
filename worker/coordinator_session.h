#ifndef RINGMASTER_WORKER_COORDINATOR_SESSION_H_
#define RINGMASTER_WORKER_COORDINATOR_SESSION_H_

// CoordinatorSession: the worker's gRPC client of NodeService (an adapter:
// the decisions are the RankLauncher's and the ProcessSupervisor's).
//
//   - Register (hostname, address, GPUs or CPU slots, labels, and the ranks
//     still running, so that a restarted coordinator can adopt them), then
//     the Session stream: `open`, a heartbeat at once and every interval
//     (the flag's, else the coordinator's heartbeat_interval, at most a third
//     of the lease), the StartRanksResult of every StartRanks, and the ranks'
//     progress (the latest report per rank; older ones are coalesced).
//   - Health: each heartbeat carries the health checks' latest failure; a
//     StartRanks while a check fails is refused (recoverable), after a
//     heartbeat that makes the node NOT_READY.
//   - StartRanks / StopRanks coming down the stream go to the RankLauncher,
//     on the stream's reader thread (starting a rank takes milliseconds);
//     CheckpointNow to the ProcessSupervisor, whose fencing tells the ranks.
//   - RequestDrain (the worker got SIGUSR1): a DrainRequest on the session,
//     and `drain` on every registration after it.
//   - Whenever the stream ends (coordinator restarted, network, a session the
//     coordinator no longer knows: NOT_FOUND / FAILED_PRECONDITION) the worker
//     registers again, after an exponential backoff with jitter that resets
//     once a session got a lease. Ranks keep running meanwhile.
//   - ReportRankExit for every exit, in order, on its own thread, retried
//     with backoff while the coordinator cannot be reached (and at once after
//     a registration). A registration lists the ranks whose exits are not
//     reported yet among the running ones, so that a coordinator that
//     restarted meanwhile waits for their reports instead of restarting
//     their generation.
// The node id the coordinator assigns is kept in node_id_path, so a restarted
// worker presents it again; the node's credential, which the coordinator
// issues with the node's first registration, goes to `credential`
// (NodeCredential keeps it in the state directory), whose channel sends it
// with every call, registrations included.
//
// Time: the injected Clock paces what the worker decides (the reconnection
// and exit-report retries, heartbeats, the heartbeat's time, Stop's
// drain_timeout), so tests drive them with a FakeClock. Waits on the network
// (RPC deadlines, the coordinator closing the stream) are in real time, as
// gRPC measures them.
//
// Thread-safe. Threads: the session thread (register, write), one reader per
// stream, the exit reporter.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/retry.h"
#include "common/tls.h"
#include "grpcpp/grpcpp.h"
#include "proto/node_service.grpc.pb.h"
#include "worker/health_checks.h"
#include "worker/node_credential.h"
#include "worker/process_supervisor.h"
#include "worker/rank_launcher.h"
#include "worker/worker_metrics.h"

namespace ringmaster::worker {

struct CoordinatorSessionOptions {
  // What the worker registers: hostname, address, gpus, cpu_slots, labels,
  // worker_version (node_id: see node_id_path).
  v1::NodeInfo node;
  // Where the node id is kept between runs; empty: not kept.
  std::string node_id_path;
  // Receives the credential a registration issues (null: dropped). The same
  // one CoordinatorChannel attaches to calls; must outlive the session.
  NodeCredential* credential = nullptr;
  // Zero: the coordinator's interval.
  absl::Duration heartbeat_interval = absl::ZeroDuration();
  // Deadline of Register and ReportRankExit calls.
  absl::Duration rpc_timeout = absl::Seconds(10);
  // Between registrations (reset once a session got a lease) and between
  // attempts of an exit report (reset once one is delivered).
  RetryPolicy retry;
  // Exit reports kept while the coordinator is away; beyond, the oldest go.
  size_t max_pending_exits = 4096;
  // The node's health checks (null: always fit; must outlive the session):
  // every heartbeat carries Failure(), and a StartRanks is refused while
  // CheckBeforePlacement fails (after a heartbeat saying so).
  HealthChecks* health = nullptr;
};

// A channel to the coordinator at `address` whose own reconnection follows
// `retry`'s initial and max delays (gRPC's default waits up to 120 s), with keepalive pings so that a
// dead coordinator or network is noticed within ~20 s even when idle.
// `tls` (null: plaintext, for a loopback coordinator) verifies the
// coordinator against its CA and presents the worker's client certificate;
// a non-empty `join_token` goes with every call (docs/security.md), and so
// does `credential`'s node credential once there is one (null: none). The
// session, the log pusher and the rendezvous/checkpoint forwarding share it.
std::shared_ptr<grpc::Channel> CoordinatorChannel(const std::string& address, const RetryPolicy& retry,
                                                  const TlsMaterial* tls = nullptr,
                                                  const std::string& join_token = "",
                                                  const NodeCredential* credential = nullptr);

class CoordinatorSession {
 public:
  // `clock`, `launcher` and `supervisor` must outlive the session; `metrics`
  // may be null.
  CoordinatorSession(std::shared_ptr<grpc::Channel> channel, Clock* clock, RankLauncher* launcher,
                     ProcessSupervisor* supervisor, WorkerMetrics* metrics, CoordinatorSessionOptions options);
  ~CoordinatorSession();
  CoordinatorSession(const CoordinatorSession&) = delete;
  CoordinatorSession& operator=(const CoordinatorSession&) = delete;

  // Starts the session and exit-reporter threads.
  void Start();
  // Queues a ReportRankExit. Never blocks.
  void ReportExit(const RankExit& exit);
  // Relays a rank's step metrics on the session. Never blocks.
  void ReportProgress(const v1::RankProgress& progress);
  // Asks the coordinator to drain this node (SIGUSR1): on the session now,
  // and with every later registration, for as long as this worker runs.
  // Never blocks.
  void RequestDrain(const std::string& reason);
  bool drain_requested() const;
  // Waits at most `drain_timeout` for queued exit reports to be delivered,
  // then closes the session (the stream's writes end) and joins every thread.
  // Idempotent.
  void Stop(absl::Duration drain_timeout = absl::Seconds(5));

  std::string node_id() const;
  bool connected() const;
  // Sessions opened so far (the first, then one per reconnection).
  int64_t sessions_opened() const;
  size_t pending_exits() const;

 private:
  using RankKey = std::tuple<std::string, int64_t, int32_t>;

  void SessionLoop();
  // One registration and the stream that follows, until it ends. Sets
  // *got_lease when the coordinator granted a lease on it.
  absl::Status RunSession(bool* got_lease);
  absl::Status Register(int64_t* session_id, absl::Duration* heartbeat_interval);
  void ReadLoop(grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>* stream, bool* got_lease);
  // The answer to a StartRanks: the launcher's, or a refusal (*unfit) while
  // a health check fails.
  v1::StartRanksResult Start(const v1::StartRanks& start, bool* unfit);
  void ExitLoop();
  v1::WorkerMessage HeartbeatMessage() const;
  v1::WorkerMessage DrainMessage() const;  // with mu_ held
  void SetNodeId(const std::string& node_id);
  // Waits on cv_ until `d` passes (on clock_) or Stop; false when stopping.
  bool SleepFor(absl::Duration d);

  const std::unique_ptr<v1::NodeService::Stub> stub_;
  Clock* const clock_;
  RankLauncher* const launcher_;
  ProcessSupervisor* const supervisor_;
  WorkerMetrics* const metrics_;
  const CoordinatorSessionOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool started_ = false;
  bool session_thread_done_ = false;
  std::string node_id_;
  bool connected_ = false;
  int64_t sessions_opened_ = 0;
  // The call in flight on the session thread, cancelled by Stop.
  grpc::ClientContext* active_call_ = nullptr;
  // Stream state, for the session thread's writer loop.
  bool reader_done_ = false;
  std::deque<v1::WorkerMessage> outbox_;
  std::map<RankKey, v1::RankProgress> progress_;
  std::string drain_reason_;  // non-empty: RequestDrain was called

  // Exit reporting.
  std::condition_variable exits_cv_;
  std::deque<RankExit> exits_;
  bool exits_stopping_ = false;
  absl::Time exits_deadline_ = absl::InfiniteFuture();
  grpc::ClientContext* exit_call_ = nullptr;
  bool exit_thread_done_ = false;
  // A registration (listing the unreported exits as running) is in flight.
  bool registering_ = false;
  // Retry a failed exit report now rather than after its backoff.
  bool retry_exits_now_ = false;

  std::thread session_thread_;
  std::thread exit_thread_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_COORDINATOR_SESSION_H_
