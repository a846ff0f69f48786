#include "coordinator/service/node_service.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "coordinator/core/orders_proto.h"
#include "coordinator/service/finish_on_executor.h"
#include "coordinator/service/node_identity.h"
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
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const bool posted = registrations_.Post([this, reactor, request, response, proof = ProofOf(*context)] {
    const absl::Status status = RegisterNow(*request, proof, response);
    if (status.ok() && poke_) poke_();
    reactor->Finish(ToGrpcStatus(status));
  });
  if (!posted) reactor->Finish(ToGrpcStatus(absl::UnavailableError("the coordinator is shutting down")));
  return reactor;
}

absl::Status NodeService::RegisterNow(const v1::RegisterNodeRequest& request, const NodeProof& proof,
                                      v1::RegisterNodeResponse* response) {
  std::vector<RunningRank> running;
  for (const v1::RunningRank& r : request.running_ranks()) {
    running.push_back({r.job_id(), r.generation(), r.global_rank()});
  }
  absl::StatusOr<NodeRegistrationResult> result =
      controller_->reconciler().RegisterNode(request.node(), running, request.drain(), &proof);
  if (!result.ok()) return result.status();
  const NodeRegistration& registration = result->registration;
  response->set_node_id(registration.node_id);
  response->set_credential(registration.credential);
  response->set_session_id(registration.session_id);
  *response->mutable_lease_duration() = ToProtoDuration(registration.lease_duration);
  *response->mutable_heartbeat_interval() = ToProtoDuration(registration.heartbeat_interval);
  for (const StopOrder& stop : result->stop) *response->add_stop() = StopRanksProto(stop);
  return absl::OkStatus();
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* NodeService::Session(
    grpc::CallbackServerContext* context) {
  return new SessionReactor(controller_, nodes_, sessions_, executor_, session_options_,
                            CallingNode(*context, *nodes_));
}

grpc::ServerUnaryReactor* NodeService::ReportRankExit(grpc::CallbackServerContext* context,
                                                      const v1::ReportRankExitRequest* request,
                                                      v1::ReportRankExitResponse*) {
  if (request->node_id().empty()) return Reply(context, absl::InvalidArgumentError("node_id: must not be empty"));
  if (request->job_id().empty()) return Reply(context, absl::InvalidArgumentError("job_id: must not be empty"));
  absl::StatusOr<std::string> node = CallingNode(*context, *nodes_);
  if (!node.ok()) return Reply(context, node.status());
  if (absl::Status s = CheckNamedNode(*node, request->node_id(), "node_id"); !s.ok()) return Reply(context, s);
  // A job no longer known: the core only releases the caller's own slot.
  if (absl::Status s = controller_->lifecycle().CheckPlacedOn(*node, request->job_id(), request->generation(),
                                                  {request->global_rank()});
      !s.ok() && s.code() != absl::StatusCode::kNotFound) {
    return Reply(context, s);
  }
  RankExit exit;
  exit.node_id = request->node_id();
  exit.job_id = request->job_id();
  exit.generation = request->generation();
  exit.global_rank = request->global_rank();
  exit.exit_code = request->exit_code();
  exit.signal = request->signal();
  exit.stopped_by_worker = request->stopped_by_worker();
  exit.stderr_tail = request->stderr_tail().substr(0, 4096);
  return FinishOnExecutor(context, executor_, [this, exit = std::move(exit)] {
    absl::Status status = controller_->lifecycle().ReportRankExit(exit);
    if (status.ok() && poke_) poke_();
    return status;
  });
}

grpc::ServerReadReactor<v1::LogChunk>* NodeService::PushLogs(grpc::CallbackServerContext* context,
                                                             v1::PushLogsResponse*) {
  absl::StatusOr<std::string> node = CallingNode(*context, *nodes_);
  std::string peer = node.ok() ? absl::StrCat("node ", *node) : context->peer();
  // Every line must be of a rank placed on the pushing node (checked on the executor).
  PushLogsReactor::Authorize authorize;
  if (node.ok()) {
    authorize = [controller = controller_, node_id = *node](const std::string& job_id, int64_t generation,
                                                            int32_t rank) {
      return controller->lifecycle().CheckPlacedOn(node_id, job_id, generation, {rank});
    };
  }
  auto* reactor = new PushLogsReactor(logs_, executor_, log_counter_, std::move(peer), std::move(authorize),
                                      [this](PushLogsReactor* r) {
                                        std::lock_guard<std::mutex> lock(pushes_mu_);
                                        pushes_.erase(r);
                                      });
  std::lock_guard<std::mutex> lock(pushes_mu_);
  if (closed_.has_value()) {
    reactor->Close(*closed_);
  } else if (!node.ok()) {
    reactor->Close(node.status());
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
