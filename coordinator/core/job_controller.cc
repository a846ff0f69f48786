// JobController: the ticker, the operations that span managers, and the
// forwarders the services still call (job_controller.h says which).
#include "coordinator/core/job_controller.h"

#include <utility>

#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {

JobController::JobController(const Clock* clock, Store* store, NodeRegistry* nodes, CheckpointRegistry* checkpoints,
                             Rendezvous* rendezvous, JobControllerOptions options)
    : store_(store),
      nodes_(nodes),
      rendezvous_(rendezvous),
      queues_(clock, options.queues.has_value() ? *options.queues : QueueConfig::Default()),
      lifecycle_(clock, store, nodes, checkpoints, rendezvous, options),
      reconciler_(nodes, &lifecycle_, options),
      dispatcher_(clock, nodes, &lifecycle_, &queues_, options.on_schedule_pass) {}

void JobController::AddListener(JobListener* listener) { lifecycle_.AddListener(listener); }

absl::Status JobController::Recover() {
  RETURN_IF_ERROR(lifecycle_.Recover());
  ASSIGN_OR_RETURN(std::vector<PlacementHold> holds, store_->LoadPlacementHolds(queues_.SeedSince()));
  std::vector<UsageInterval> intervals;
  for (const PlacementHold& h : holds) intervals.push_back({h.queue, h.start, h.end, h.gpus, h.cpu_slots});
  queues_.Seed(intervals);
  return absl::OkStatus();
}

// ---- JobService ----

absl::StatusOr<v1::Job> JobController::Submit(v1::JobSpec spec, const SubmitOptions& options) {
  ASSIGN_OR_RETURN(std::string queue, queues_.Resolve(options.user, spec.queue()));
  spec.set_queue(queue);
  return lifecycle_.Submit(std::move(spec), options);
}

absl::StatusOr<v1::Job> JobController::GetJob(const std::string& job_id) const {
  return lifecycle_.views().GetJob(job_id);
}

absl::StatusOr<EventPage> JobController::GetEventPage(const std::string& job_id, const EventPageQuery& query) const {
  return lifecycle_.GetEventPage(job_id, query);
}

absl::Status JobController::SnapshotJob(
    const std::string& job_id, int64_t after_sequence,
    const std::function<void(const v1::Job&, const EventPage&)>& at_snapshot) const {
  return lifecycle_.SnapshotJob(job_id, after_sequence, at_snapshot);
}

absl::StatusOr<ListJobsPage> JobController::ListJobs(const ListJobsQuery& query) const {
  return lifecycle_.views().ListJobs(query);
}

absl::StatusOr<CancelResult> JobController::Cancel(const std::string& job_id, const std::string& reason) {
  return lifecycle_.Cancel(job_id, reason);
}

absl::StatusOr<std::vector<v1::CheckpointInfo>> JobController::ListCheckpoints(const std::string& job_id,
                                                                              bool include_incomplete) const {
  return lifecycle_.ListCheckpoints(job_id, include_incomplete);
}

// ---- NodeService ----

absl::StatusOr<NodeRegistrationResult> JobController::RegisterNode(const v1::NodeInfo& node,
                                                                   const std::vector<RunningRank>& running,
                                                                   bool worker_drains, const NodeProof* proof) {
  return reconciler_.RegisterNode(node, running, worker_drains, proof);
}

absl::Status JobController::CheckPlacedOn(const std::string& node_id, const std::string& job_id, int64_t generation,
                                          const std::vector<int32_t>& ranks) const {
  return lifecycle_.CheckPlacedOn(node_id, job_id, generation, ranks);
}

absl::Status JobController::CheckHostsJob(const std::string& node_id, const std::string& job_id) const {
  return lifecycle_.CheckHostsJob(node_id, job_id);
}

void JobController::AssignmentsForNode(const std::string& node_id,
                                       const std::function<void(const std::vector<StartOrder>&)>& at_snapshot) const {
  reconciler_.AssignmentsForNode(node_id, at_snapshot);
}

absl::Status JobController::ReportRankExit(const RankExit& exit) { return lifecycle_.ReportRankExit(exit); }

absl::Status JobController::ReportStartFailure(const StartFailure& failure) {
  return lifecycle_.ReportStartFailure(failure);
}

absl::StatusOr<bool> JobController::ReportProgress(const std::string& job_id, int64_t generation,
                                                   int32_t global_rank, const v1::StepMetrics& metrics) {
  return lifecycle_.ReportProgress(job_id, generation, global_rank, metrics);
}

// ---- CheckpointService ----

absl::StatusOr<CommitResult> JobController::CommitCheckpoint(const ShardCommit& commit) {
  return lifecycle_.CommitCheckpoint(commit);
}

absl::StatusOr<v1::CheckpointInfo> JobController::LatestCheckpoint(const std::string& job_id) const {
  return lifecycle_.LatestCheckpoint(job_id);
}

absl::Status JobController::ReportDamagedCheckpoint(const DamagedCheckpoint& report) {
  return lifecycle_.ReportDamagedCheckpoint(report);
}

// ---- time ----

// ---- cordon and drain ----

absl::StatusOr<v1::NodeInfo> JobController::CordonNode(const std::string& node, const std::string& by,
                                                       const std::string& reason) {
  ASSIGN_OR_RETURN(std::string node_id, nodes_->Resolve(node));
  return nodes_->SetCordon(node_id, by, reason);
}

absl::StatusOr<DrainResult> JobController::DrainNode(const std::string& node, const std::string& by,
                                                     const std::string& reason) {
  ASSIGN_OR_RETURN(std::string node_id, nodes_->Resolve(node));
  ASSIGN_OR_RETURN(v1::NodeInfo info, nodes_->StartDrain(node_id, by, reason));
  DrainResult result;
  result.job_ids = lifecycle_.DrainNode(node_id, info.hostname());
  ASSIGN_OR_RETURN(result.node, nodes_->GetNode(node_id));
  return result;
}

void JobController::ContinueDrains() {
  for (const std::string& node_id : nodes_->DrainingNodes()) {
    absl::StatusOr<v1::NodeInfo> info = nodes_->GetNode(node_id);
    if (!info.ok()) continue;
    // Done once no job is placed there and every rank stopped there has exited.
    if (lifecycle_.DrainNode(node_id, info->hostname()).empty() && nodes_->SlotsOn(node_id).empty()) {
      if (absl::Status s = nodes_->EndDrain(node_id); !s.ok()) {
        spdlog::warn("node {}: drain end not stored (next tick): {}", info->hostname(), s.ToString());
      } else {
        spdlog::info("node {} drained: nothing runs there; it stays cordoned", info->hostname());
      }
    }
  }
}

void JobController::Tick() {
  reconciler_.HandleLostNodes();
  lifecycle_.CheckProgress();
  ContinueDrains();
  lifecycle_.ContinuePreemptions();
  dispatcher_.AccountUsage();
  rendezvous_->CheckDeadlines();  // may call OnRendezvousFailed: no lock of ours held here
  ScheduleNow();
}

void JobController::ScheduleNow() { dispatcher_.ScheduleNow(); }

// ---- RendezvousListener ----

void JobController::OnRendezvousComplete(const std::string& job_id, int64_t generation) {
  lifecycle_.OnRendezvousComplete(job_id, generation);
}

void JobController::OnRendezvousFailed(const std::string& job_id, int64_t generation, const std::string& reason) {
  lifecycle_.OnRendezvousFailed(job_id, generation, reason);
}

void JobController::ReplaceQueues(QueueConfig config) { queues_.Replace(std::move(config)); }

absl::StatusOr<std::vector<std::string>> JobController::ExpireFinishedJobs(absl::Time now,
                                                                          const JobRetention& retention) {
  return lifecycle_.ExpireFinished(now, retention);
}

}  // namespace ringmaster::coordinator
