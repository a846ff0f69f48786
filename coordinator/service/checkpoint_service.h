#ifndef RINGMASTER_COORDINATOR_CHECKPOINT_SERVICE_H_
#define RINGMASTER_COORDINATOR_CHECKPOINT_SERVICE_H_

// CheckpointService: the gRPC adapter of ringmaster.v1.CheckpointService
// over JobController::CommitCheckpoint / LatestCheckpoint /
// ReportDamagedCheckpoint. Unary handlers
// answered inline (a commit is one SQLite transaction). Fencing
// (FAILED_PRECONDITION for a generation that is over) and validation
// (INVALID_ARGUMENT naming the field) pass through. Owns no state;
// thread-safe.

#include "coordinator/core/job_controller.h"
#include "grpcpp/grpcpp.h"
#include "proto/checkpoint_service.grpc.pb.h"

namespace ringmaster::coordinator {

class CheckpointService final : public v1::CheckpointService::CallbackService {
 public:
  explicit CheckpointService(JobController* controller);

  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* context, const v1::CommitCheckpointRequest* request,
                                   v1::CommitCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* GetLatestCheckpoint(grpc::CallbackServerContext* context,
                                                const v1::GetLatestCheckpointRequest* request,
                                                v1::GetLatestCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* ReportDamaged(grpc::CallbackServerContext* context,
                                          const v1::ReportDamagedCheckpointRequest* request,
                                          v1::ReportDamagedCheckpointResponse* response) override;

 private:
  JobController* const controller_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CHECKPOINT_SERVICE_H_
