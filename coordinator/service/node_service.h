#ifndef RINGMASTER_COORDINATOR_NODE_SERVICE_H_
#define RINGMASTER_COORDINATOR_NODE_SERVICE_H_

// NodeService: the gRPC adapter of ringmaster.v1.NodeService (what workers
// call). Owns no state but the threads that register nodes.
//
//   Register: unary, on a thread of its own pool (it waits for the store's
//     fsync, which must not hold a gRPC thread: a burst of registrations
//     then shares transactions, see NodeStoreWriter):
//     NodeReconciler::RegisterNode; answers the node id, a new session id,
//     the lease and heartbeat interval, and stop orders for reported ranks
//     whose generation is over. Pokes the scheduler (new capacity).
//   Session: a SessionReactor (session_reactor.h has the protocol).
//   ReportRankExit: unary, on the executor (it writes the store;
//     finish_on_executor.h): JobLifecycle::ReportRankExit. Pokes the
//     scheduler (slots were freed).
//   PushLogs: a PushLogsReactor into the LogStore; the open ones are kept
//     so that CloseStreams can end them at shutdown.
//
// Thread-safe: the collaborators are; they must outlive the server.

#include <functional>
#include <mutex>
#include <optional>
#include <set>

#include "coordinator/core/executor.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/store/log_store.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/node_sessions.h"
#include "coordinator/service/push_logs_reactor.h"
#include "coordinator/service/session_reactor.h"
#include "grpcpp/grpcpp.h"
#include "proto/node_service.grpc.pb.h"

namespace ringmaster::coordinator {

class NodeService final : public v1::NodeService::CallbackService {
 public:
  NodeService(JobController* controller, NodeRegistry* nodes, NodeSessions* sessions, LogStore* logs,
              Executor* executor, std::function<void()> poke, LogLinesCounter log_counter,
              SessionOptions session_options = {});

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context, const v1::RegisterNodeRequest* request,
                                     v1::RegisterNodeResponse* response) override;
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Session(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ReportRankExit(grpc::CallbackServerContext* context,
                                           const v1::ReportRankExitRequest* request,
                                           v1::ReportRankExitResponse* response) override;
  grpc::ServerReadReactor<v1::LogChunk>* PushLogs(grpc::CallbackServerContext* context,
                                                  v1::PushLogsResponse* response) override;

  // Ends every PushLogs stream with `status`, and later ones at once. For
  // shutdown (sessions end through NodeSessions::CloseAll).
  void CloseStreams(const absl::Status& status);

 private:
  // Register's work, on registrations_: fills `response`.
  absl::Status RegisterNow(const v1::RegisterNodeRequest& request, const NodeProof& proof,
                           v1::RegisterNodeResponse* response);

  JobController* const controller_;
  NodeRegistry* const nodes_;
  NodeSessions* const sessions_;
  LogStore* const logs_;
  Executor* const executor_;
  const std::function<void()> poke_;
  const LogLinesCounter log_counter_;
  const SessionOptions session_options_;

  // Register's: each registration waits here for its row to be durable, so
  // this many can share one transaction.
  static constexpr size_t kRegisterThreads = 16;
  Executor registrations_{ExecutorOptions{"rm-register", kRegisterThreads, false}};
  std::mutex pushes_mu_;
  std::set<PushLogsReactor*> pushes_;
  std::optional<absl::Status> closed_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_NODE_SERVICE_H_
