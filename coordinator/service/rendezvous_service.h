#ifndef RINGMASTER_COORDINATOR_RENDEZVOUS_SERVICE_H_
#define RINGMASTER_COORDINATOR_RENDEZVOUS_SERVICE_H_

// RendezvousService: the gRPC adapter of ringmaster.v1.RendezvousService
// over the Rendezvous (how a generation's ranks find each other). Owns no
// state; fencing errors (FAILED_PRECONDITION) and the rest pass through with
// their codes. Every call must carry its generation's rendezvous secret in
// its scope (Rendezvous::CheckSecret): without it, PERMISSION_DENIED before
// anything else is checked or revealed. It must come from a node (the node
// credential: UNAUTHENTICATED without one) on which the scope's rank was
// placed in the scope's generation (PERMISSION_DENIED otherwise): a node
// speaks for its own ranks only (node_identity.h).
//
//   Every call is unary and answered without holding a thread: the quick
//   ones inline (a map update under the Rendezvous lock); GetNcclUniqueId and
//   KvWait park in the Rendezvous until the data is there or time runs out
//   (the request's timeout, the call's gRPC deadline, the generation's
//   rendezvous deadline, whichever is first) and are finished from the thread
//   that set the data or from the coordinator's tick. Beyond the Rendezvous's
//   limit of parked calls a new one gets RESOURCE_EXHAUSTED at once (the
//   client retries after a backoff). A call the client cancels stays parked
//   until its own deadline.
//
// Thread-safe; the Rendezvous must outlive the server (stop them in the
// order Rendezvous::Shutdown, then server Shutdown).

#include "absl/status/statusor.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/rendezvous.h"
#include "grpcpp/grpcpp.h"
#include "proto/rendezvous_service.grpc.pb.h"

namespace ringmaster::coordinator {

class RendezvousService final : public v1::RendezvousService::CallbackService {
 public:
  // All must outlive the server.
  RendezvousService(Rendezvous* rendezvous, const NodeRegistry* nodes, const JobController* controller);

  grpc::ServerUnaryReactor* PublishNcclUniqueId(grpc::CallbackServerContext* context,
                                                const v1::PublishNcclUniqueIdRequest* request,
                                                v1::PublishNcclUniqueIdResponse* response) override;
  grpc::ServerUnaryReactor* GetNcclUniqueId(grpc::CallbackServerContext* context,
                                            const v1::GetNcclUniqueIdRequest* request,
                                            v1::GetNcclUniqueIdResponse* response) override;
  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context, const v1::KvSetRequest* request,
                                  v1::KvSetResponse* response) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context, const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override;
  grpc::ServerUnaryReactor* KvWait(grpc::CallbackServerContext* context, const v1::KvWaitRequest* request,
                                   v1::KvWaitResponse* response) override;
  grpc::ServerUnaryReactor* KvAdd(grpc::CallbackServerContext* context, const v1::KvAddRequest* request,
                                  v1::KvAddResponse* response) override;

 private:
  // The caller's scope, once its node is known, it has shown its
  // generation's secret and its rank is placed on its node.
  absl::StatusOr<RendezvousScope> Scope(const grpc::CallbackServerContext& context,
                                        const v1::RendezvousScope& scope) const;

  Rendezvous* const rendezvous_;
  const NodeRegistry* const nodes_;
  const JobController* const controller_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_RENDEZVOUS_SERVICE_H_
