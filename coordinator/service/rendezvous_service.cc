#include "coordinator/service/rendezvous_service.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "coordinator/service/node_identity.h"

namespace ringmaster::coordinator {
namespace {

// The earliest of the request's timeout (zero: none) and the call's deadline;
// zero means none (the generation's deadline bounds the wait).
absl::Duration WaitTimeout(const grpc::CallbackServerContext* context, const google::protobuf::Duration& timeout) {
  absl::Duration wait = FromProtoDuration(timeout);
  if (wait < absl::ZeroDuration()) wait = absl::ZeroDuration();
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    // At least a millisecond: zero would mean "no timeout".
    absl::Duration left = std::max(absl::FromChrono(deadline) - absl::Now(), absl::Milliseconds(1));
    if (wait == absl::ZeroDuration() || left < wait) wait = left;
  }
  return wait;
}

}  // namespace

RendezvousService::RendezvousService(Rendezvous* rendezvous, const NodeRegistry* nodes,
                                     const JobController* controller)
    : rendezvous_(rendezvous), nodes_(nodes), controller_(controller) {}

absl::StatusOr<RendezvousScope> RendezvousService::Scope(const grpc::CallbackServerContext& context,
                                                         const v1::RendezvousScope& scope) const {
  ASSIGN_OR_RETURN(std::string node, CallingNode(context, *nodes_));
  if (scope.job_id().empty()) return absl::InvalidArgumentError("scope.job_id: must not be empty");
  if (scope.generation() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("scope.generation: must be >= 1, got ", scope.generation()));
  }
  RendezvousScope out{scope.job_id(), scope.generation(), scope.rank(), scope.secret()};
  RETURN_IF_ERROR(rendezvous_->CheckSecret(out));
  RETURN_IF_ERROR(controller_->lifecycle().CheckPlacedOn(node, scope.job_id(), scope.generation(), {scope.rank()}));
  return out;
}

grpc::ServerUnaryReactor* RendezvousService::PublishNcclUniqueId(grpc::CallbackServerContext* context,
                                                                 const v1::PublishNcclUniqueIdRequest* request,
                                                                 v1::PublishNcclUniqueIdResponse*) {
  absl::StatusOr<RendezvousScope> scope = Scope(*context, request->scope());
  if (!scope.ok()) return Reply(context, scope.status());
  return Reply(context, rendezvous_->PublishNcclUniqueId(*scope, request->communicator(), request->unique_id()));
}

grpc::ServerUnaryReactor* RendezvousService::GetNcclUniqueId(grpc::CallbackServerContext* context,
                                                             const v1::GetNcclUniqueIdRequest* request,
                                                             v1::GetNcclUniqueIdResponse* response) {
  absl::StatusOr<RendezvousScope> scope = Scope(*context, request->scope());
  if (!scope.ok()) return Reply(context, scope.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  rendezvous_->GetNcclUniqueIdAsync(*scope, request->communicator(), WaitTimeout(context, request->timeout()),
                                    [reactor, response](absl::StatusOr<std::vector<std::string>> id) {
                                      if (id.ok()) response->set_unique_id(std::move(id->front()));
                                      reactor->Finish(ToGrpcStatus(id.status()));
                                    });
  return reactor;
}

grpc::ServerUnaryReactor* RendezvousService::KvSet(grpc::CallbackServerContext* context,
                                                   const v1::KvSetRequest* request, v1::KvSetResponse*) {
  absl::StatusOr<RendezvousScope> scope = Scope(*context, request->scope());
  if (!scope.ok()) return Reply(context, scope.status());
  return Reply(context, rendezvous_->KvSet(*scope, request->key(), request->value()));
}

grpc::ServerUnaryReactor* RendezvousService::KvGet(grpc::CallbackServerContext* context,
                                                   const v1::KvGetRequest* request, v1::KvGetResponse* response) {
  absl::StatusOr<RendezvousScope> scope = Scope(*context, request->scope());
  if (!scope.ok()) return Reply(context, scope.status());
  absl::StatusOr<std::optional<std::string>> value = rendezvous_->KvGet(*scope, request->key());
  if (!value.ok()) return Reply(context, value.status());
  response->set_found(value->has_value());
  if (value->has_value()) response->set_value(**value);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* RendezvousService::KvWait(grpc::CallbackServerContext* context,
                                                    const v1::KvWaitRequest* request, v1::KvWaitResponse* response) {
  absl::StatusOr<RendezvousScope> scope = Scope(*context, request->scope());
  if (!scope.ok()) return Reply(context, scope.status());
  std::vector<std::string> keys(request->keys().begin(), request->keys().end());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  rendezvous_->KvWaitAsync(*scope, keys, WaitTimeout(context, request->timeout()),
                           [reactor, response](absl::StatusOr<std::vector<std::string>> values) {
                             if (values.ok()) {
                               for (std::string& v : *values) response->add_values(std::move(v));
                             }
                             reactor->Finish(ToGrpcStatus(values.status()));
                           });
  return reactor;
}

grpc::ServerUnaryReactor* RendezvousService::KvAdd(grpc::CallbackServerContext* context,
                                                   const v1::KvAddRequest* request, v1::KvAddResponse* response) {
  absl::StatusOr<RendezvousScope> scope = Scope(*context, request->scope());
  if (!scope.ok()) return Reply(context, scope.status());
  absl::StatusOr<int64_t> value = rendezvous_->KvAdd(*scope, request->key(), request->delta());
  if (!value.ok()) return Reply(context, value.status());
  response->set_value(*value);
  return Reply(context, absl::OkStatus());
}

}  // namespace ringmaster::coordinator
