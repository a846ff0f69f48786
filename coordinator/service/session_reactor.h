#ifndef RINGMASTER_COORDINATOR_SESSION_REACTOR_H_
#define RINGMASTER_COORDINATOR_SESSION_REACTOR_H_

// SessionReactor: one NodeService.Session stream, the worker's long-lived
// connection. The protocol as served:
//
//   worker -> open{node_id, session_id}   first message, exactly once;
//             node_id must be the node of the call's credential (else the
//             stream ends with UNAUTHENTICATED / PERMISSION_DENIED); the
//             session must be the node's current registration, else the
//             stream ends with the registry's NOT_FOUND/FAILED_PRECONDITION
//             (the worker registers again). On open the coordinator sends the
//             stop orders kept for the node, then a StartRanks per
//             generation that should run there (AssignmentsForNode).
//   worker -> heartbeat                   renews the lease and sets the node's
//             health (NodeRegistry::Heartbeat); answered with a LeaseGrant{expiry}. A heartbeat the
//             registry refuses (LOST node, superseded session) ends the stream
//             with that error.
//   worker -> progress                    JobLifecycle::ReportProgress; a
//             report from a generation that is over is answered with a
//             StopRanks for that rank.
//   worker -> start_result                an error fails the generation
//             (JobLifecycle::ReportStartFailure; FAILED at once when the
//             worker says no restart can fix it).
//   A progress report or start result about a rank (a generation) not
//   placed on the node ends the stream with PERMISSION_DENIED; nothing of the
//   job changes (JobLifecycle::CheckPlacedOn).
//   coordinator -> start / stop           as the JobController orders them
//             (through NodeSessions), in order.
//   The coordinator ends the stream when the node's registration is
//   superseded or its lease ran out (NodeSessions::CloseInvalid), at
//   shutdown (UNAVAILABLE), or when the worker ends it. A session that ends
//   changes nothing else: the node is left to its lease.
//
// Each incoming message is handled on the executor (the core's calls take
// locks and write SQLite), one at a time: the next read starts once the
// message is handled, so a session's messages are handled in order and a
// fast worker is held back by gRPC flow control. Writes go one at a time
// from an outbox (at most max_outbox messages, else the stream ends with
// RESOURCE_EXHAUSTED). gRPC operations start with no lock held.
//
// Deletes itself when gRPC is done and no task of it is pending.

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "coordinator/core/executor.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/node_sessions.h"
#include "grpcpp/grpcpp.h"
#include "proto/node_service.grpc.pb.h"

namespace ringmaster::coordinator {

struct SessionOptions {
  absl::Duration stop_grace_period = absl::Seconds(30);  // of the stop orders answering stale progress
  size_t max_outbox = 10000;
};

class SessionReactor final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>,
                             public SessionSink {
 public:
  // `caller`: the node the stream's credential says it comes from, or why
  // it has none (node_identity.h CallingNode); `open` must name it.
  SessionReactor(JobController* controller, NodeRegistry* nodes, NodeSessions* sessions, Executor* executor,
                 SessionOptions options, absl::StatusOr<std::string> caller);

  // SessionSink (under NodeSessions' lock: record, post).
  void Send(v1::CoordinatorMessage message) override;
  void Close(const absl::Status& status) override;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  // On the executor: one message, then the next read.
  void Handle(const v1::WorkerMessage& message);
  absl::Status HandleOpen(const v1::SessionOpen& open);
  absl::Status HandleHeartbeat(const v1::Heartbeat& heartbeat);
  // The worker drains its own node (SIGUSR1): JobController::DrainNode.
  void HandleDrain(const v1::DrainRequest& drain);
  absl::Status HandleProgress(const v1::RankProgress& progress);
  absl::Status HandleStartResult(const v1::StartRanksResult& result);
  void Pump();
  void PostPumpLocked();
  bool Post(std::function<void()> task);
  void Unref();
  void FailLocked(const grpc::Status& status);

  JobController* const controller_;
  NodeRegistry* const nodes_;
  NodeSessions* const sessions_;
  Executor* const executor_;
  const SessionOptions options_;
  const absl::StatusOr<std::string> caller_;
  std::atomic<int> refs_{1};

  v1::WorkerMessage incoming_;  // owned by the read in flight
  // Set by the open message, read by later handlers (one at a time).
  std::string node_id_;
  int64_t session_id_ = 0;

  std::mutex mu_;
  bool attached_ = false;
  std::deque<v1::CoordinatorMessage> outbox_;
  v1::CoordinatorMessage writing_message_;
  bool writing_ = false;
  bool pump_posted_ = false;
  // A message is being handled: the next read starts after it, and Finish
  // waits (a read must never start after Finish).
  bool handling_ = false;
  int starting_reads_ = 0;  // StartRead calls in progress: Finish waits
  std::optional<grpc::Status> finish_with_;
  bool finished_ = false;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_SESSION_REACTOR_H_
