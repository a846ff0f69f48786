#ifndef RINGMASTER_COORDINATOR_CHECKPOINT_SERVICE_H_
#define RINGMASTER_COORDINATOR_CHECKPOINT_SERVICE_H_

// CheckpointService: the gRPC adapter of ringmaster.v1.CheckpointService
// over JobLifecycle::CommitCheckpoint / LatestCheckpoint /
// ReportDamagedCheckpoint. Unary handlers; Commit and ReportDamaged write
// the store, so they do it on the executor and finish from there
// (finish_on_executor.h); GetLatestCheckpoint reads, inline. Fencing
// (FAILED_PRECONDITION for a generation that is over) and validation
// (INVALID_ARGUMENT naming the field) pass through. Every call must come
// from a node (its credential: UNAUTHENTICATED without one); Commit and
// ReportDamaged only for a rank placed on that node in that generation
// (PERMISSION_DENIED otherwise, checked before anything else; node_identity.h);
// GetLatestCheckpoint only for a job whose current generation has a rank
// there (JobLifecycle::CheckHostsJob).
// Owns no state; thread-safe.

#include "coordinator/core/executor.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/node_registry.h"
#include "grpcpp/grpcpp.h"
#include "proto/checkpoint_service.grpc.pb.h"

namespace ringmaster::coordinator {

class CheckpointService final : public v1::CheckpointService::CallbackService {
 public:
  // All must outlive the server.
  CheckpointService(JobController* controller, const NodeRegistry* nodes, Executor* executor);

  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* context, const v1::CommitCheckpointRequest* request,
                                   v1::CommitCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* GetLatestCheckpoint(grpc::CallbackServerContext* context,
                                                const v1::GetLatestCheckpointRequest* request,
                                                v1::GetLatestCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* ReportDamaged(grpc::CallbackServerContext* context,
                                          const v1::ReportDamagedCheckpointRequest* request,
                                          v1::ReportDamagedCheckpointResponse* response) override;

 private:
  // OK when the call comes from the node `rank` of that generation of the
  // job was placed on.
  absl::Status CheckCaller(const grpc::CallbackServerContext& context, const std::string& job_id, int64_t generation,
                           int32_t rank) const;

  JobController* const controller_;
  const NodeRegistry* const nodes_;
  Executor* const executor_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CHECKPOINT_SERVICE_H_
