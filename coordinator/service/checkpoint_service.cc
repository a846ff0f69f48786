#include "coordinator/service/checkpoint_service.h"

#include <utility>

#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "coordinator/service/finish_on_executor.h"
#include "coordinator/service/node_identity.h"

namespace ringmaster::coordinator {
CheckpointService::CheckpointService(JobController* controller, const NodeRegistry* nodes, Executor* executor)
    : controller_(controller), nodes_(nodes), executor_(executor) {}

absl::Status CheckpointService::CheckCaller(const grpc::CallbackServerContext& context, const std::string& job_id,
                                            int64_t generation, int32_t rank) const {
  ASSIGN_OR_RETURN(std::string node, CallingNode(context, *nodes_));
  return controller_->lifecycle().CheckPlacedOn(node, job_id, generation, {rank});
}

grpc::ServerUnaryReactor* CheckpointService::Commit(grpc::CallbackServerContext* context,
                                                    const v1::CommitCheckpointRequest* request,
                                                    v1::CommitCheckpointResponse* response) {
  if (request->job_id().empty()) return Reply(context, absl::InvalidArgumentError("job_id: must not be empty"));
  if (absl::Status s = CheckCaller(*context, request->job_id(), request->generation(), request->rank()); !s.ok()) {
    return Reply(context, s);
  }
  ShardCommit commit;
  commit.job_id = request->job_id();
  commit.generation = request->generation();
  commit.step = request->step();
  commit.path = request->path();
  commit.rank = request->rank();
  commit.pipeline_stage = request->pipeline_stage();
  commit.pipeline_stages = request->pipeline_stages();
  commit.whole_model = request->whole_model();
  commit.write_seconds = request->write_seconds();
  if (request->has_stall_seconds()) commit.stall_seconds = request->stall_seconds();
  commit.files.assign(request->files().begin(), request->files().end());
  return FinishOnExecutor(context, executor_, [this, response, commit = std::move(commit)] {
    absl::StatusOr<CommitResult> result = controller_->lifecycle().CommitCheckpoint(commit);
    if (!result.ok()) return result.status();
    *response->mutable_checkpoint() = std::move(result->checkpoint);
    for (std::string& path : result->prune_paths) response->add_prune_paths(std::move(path));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* CheckpointService::GetLatestCheckpoint(grpc::CallbackServerContext* context,
                                                                 const v1::GetLatestCheckpointRequest* request,
                                                                 v1::GetLatestCheckpointResponse* response) {
  if (request->job_id().empty()) return Reply(context, absl::InvalidArgumentError("job_id: must not be empty"));
  // A read, but of a job's paths and checksums: only a node its current generation is placed on.
  absl::StatusOr<std::string> node = CallingNode(*context, *nodes_);
  if (!node.ok()) return Reply(context, node.status());
  if (absl::Status s = controller_->lifecycle().CheckHostsJob(*node, request->job_id()); !s.ok())
    return Reply(context, s);
  absl::StatusOr<v1::CheckpointInfo> latest = controller_->lifecycle().LatestCheckpoint(request->job_id());
  if (!latest.ok()) return Reply(context, latest.status());
  *response->mutable_checkpoint() = *std::move(latest);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CheckpointService::ReportDamaged(grpc::CallbackServerContext* context,
                                                           const v1::ReportDamagedCheckpointRequest* request,
                                                           v1::ReportDamagedCheckpointResponse*) {
  if (request->job_id().empty()) return Reply(context, absl::InvalidArgumentError("job_id: must not be empty"));
  if (absl::Status s = CheckCaller(*context, request->job_id(), request->generation(), request->rank()); !s.ok()) {
    return Reply(context, s);
  }
  DamagedCheckpoint report;
  report.job_id = request->job_id();
  report.generation = request->generation();
  report.rank = request->rank();
  report.checkpoint_generation = request->checkpoint_generation();
  report.checkpoint_step = request->checkpoint_step();
  report.reason = request->reason();
  return FinishOnExecutor(context, executor_, [this, report = std::move(report)] {
    return controller_->lifecycle().ReportDamagedCheckpoint(report);
  });
}

}  // namespace ringmaster::coordinator
