#include "coordinator/service/node_service.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "coordinator/core/orders_proto.h"
#include "common/proto_time.h"

namespace ringmaster::coordinator {
NodeService::NodeService(JobController* controller, NodeRegistry* nodes, NodeSessions* sessions, LogStore* logs,
                         Executor* executor, std::function<void()> poke, LogLinesCounter log_counter,
                         SessionOptions session_options)
    : controller_(controller),
      nodes_(nodes),
      sessions_(sessions),
      logs_(logs),
      executor_(executor),
      poke_(std::move(poke)),
      log_counter_(std::move(log_counter)),
      session_options_(session_options) {}

grpc::ServerUnaryReactor* NodeService::Register(grpc::CallbackServerContext* context,
                                                const v1::RegisterNodeRequest* request,
                                                v1::RegisterNodeResponse* response) {
  if (!request->has_node()) return Reply(context, absl::InvalidArgumentError("node: must be set"));
  std::vector<RunningRank> running;
  for (const v1::RunningRank& r : request->running_ranks()) {
    running.push_back({r.job_id(), r.generation(), r.global_rank()});
  }
  absl::StatusOr<NodeRegistrationResult> result = controller_->RegisterNode(request->node(), running, request->drain());
  if (!result.ok()) return Reply(context, result.status());
  const NodeRegistration& registration = result->registration;
  response->set_node_id(registration.node_id);
  response->set_session_id(registration.session_id);
  *response->mutable_lease_duration() = ToProtoDuration(registration.lease_duration);
  *response->mutable_heartbeat_interval() = ToProtoDuration(registration.heartbeat_interval);
  for (const StopOrder& stop : result->stop) *response->add_stop() = StopRanksProto(stop);
  if (poke_) poke_();
  return Reply(context, absl::OkStatus());
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* NodeService::Session(grpc::CallbackServerContext*) {
  return new SessionReactor(controller_, nodes_, sessions_, executor_, session_options_);
}

grpc::ServerUnaryReactor* NodeService::ReportRankExit(grpc::CallbackServerContext* context,
                                                      const v1::ReportRankExitRequest* request,
                                                      v1::ReportRankExitResponse*) {
  if (request->node_id().empty()) return Reply(context, absl::InvalidArgumentError("node_id: must not be empty"));
  if (request->job_id().empty()) return Reply(context, absl::InvalidArgumentError("job_id: must not be empty"));
  RankExit exit;
  exit.node_id = request->node_id();
  exit.job_id = request->job_id();
  exit.generation = request->generation();
  exit.global_rank = request->global_rank();
  exit.exit_code = request->exit_code();
  exit.signal = request->signal();
  exit.stopped_by_worker = request->stopped_by_worker();
  exit.stderr_tail = request->stderr_tail().substr(0, 4096);
  absl::Status status = controller_->ReportRankExit(exit);
  if (status.ok() && poke_) poke_();
  return Reply(context, status);
}

grpc::ServerReadReactor<v1::LogChunk>* NodeService::PushLogs(grpc::CallbackServerContext* context,
                                                             v1::PushLogsResponse*) {
  std::string peer = context->peer();
  auto node = context->client_metadata().find("ringmaster-node-id");
  if (node != context->client_metadata().end()) {
    peer = absl::StrCat("node ", std::string(node->second.data(), node->second.size()));
  }
  auto* reactor = new PushLogsReactor(logs_, executor_, log_counter_, std::move(peer), [this](PushLogsReactor* r) {
    std::lock_guard<std::mutex> lock(pushes_mu_);
    pushes_.erase(r);
  });
  std::lock_guard<std::mutex> lock(pushes_mu_);
  if (closed_.has_value()) {
    reactor->Close(*closed_);
  } else {
    pushes_.insert(reactor);
  }
  return reactor;
}

void NodeService::CloseStreams(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(pushes_mu_);
  closed_ = status;
  for (PushLogsReactor* reactor : pushes_) reactor->Close(status);
}

}  // namespace ringmaster::coordinator
