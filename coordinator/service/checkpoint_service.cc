#include "coordinator/service/checkpoint_service.h"

#include <utility>

#include "common/grpc_status.h"

namespace ringmaster::coordinator {
CheckpointService::CheckpointService(JobController* controller) : controller_(controller) {}

grpc::ServerUnaryReactor* CheckpointService::Commit(grpc::CallbackServerContext* context,
                                                    const v1::CommitCheckpointRequest* request,
                                                    v1::CommitCheckpointResponse* response) {
  if (request->job_id().empty()) return Reply(context, absl::InvalidArgumentError("job_id: must not be empty"));
  ShardCommit commit;
  commit.job_id = request->job_id();
  commit.generation = request->generation();
  commit.step = request->step();
  commit.path = request->path();
  commit.rank = request->rank();
  commit.pipeline_stage = request->pipeline_stage();
  commit.pipeline_stages = request->pipeline_stages();
  commit.whole_model = request->whole_model();
  commit.files.assign(request->files().begin(), request->files().end());
  absl::StatusOr<CommitResult> result = controller_->CommitCheckpoint(commit);
  if (!result.ok()) return Reply(context, result.status());
  *response->mutable_checkpoint() = std::move(result->checkpoint);
  for (std::string& path : result->prune_paths) response->add_prune_paths(std::move(path));
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CheckpointService::GetLatestCheckpoint(grpc::CallbackServerContext* context,
                                                                 const v1::GetLatestCheckpointRequest* request,
                                                                 v1::GetLatestCheckpointResponse* response) {
  if (request->job_id().empty()) return Reply(context, absl::InvalidArgumentError("job_id: must not be empty"));
  absl::StatusOr<v1::CheckpointInfo> latest = controller_->LatestCheckpoint(request->job_id());
  if (!latest.ok()) return Reply(context, latest.status());
  *response->mutable_checkpoint() = *std::move(latest);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CheckpointService::ReportDamaged(grpc::CallbackServerContext* context,
                                                           const v1::ReportDamagedCheckpointRequest* request,
                                                           v1::ReportDamagedCheckpointResponse*) {
  if (request->job_id().empty()) return Reply(context, absl::InvalidArgumentError("job_id: must not be empty"));
  DamagedCheckpoint report;
  report.job_id = request->job_id();
  report.generation = request->generation();
  report.rank = request->rank();
  report.checkpoint_generation = request->checkpoint_generation();
  report.checkpoint_step = request->checkpoint_step();
  report.reason = request->reason();
  return Reply(context, controller_->ReportDamagedCheckpoint(report));
}

}  // namespace ringmaster::coordinator
