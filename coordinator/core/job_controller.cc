// JobController: the ticker and the operations that span managers.
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

// ---- cordon and drain ----

absl::StatusOr<v1::NodeInfo> JobController::CordonNode(const std::string& node, const std::string& by,
                                                       const std::string& reason) {
  ASSIGN_OR_RETURN(std::string node_id, nodes_->Resolve(node));
  ASSIGN_OR_RETURN(v1::NodeInfo info, nodes_->SetCordon(node_id, by, reason));
  if (by.empty()) lifecycle_.ForgetQuarantine(node_id);  // a quarantine ends with the uncordon
  return info;
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

// ---- time ----

void JobController::Tick() {
  reconciler_.HandleLostNodes();
  lifecycle_.CheckProgress();
  ContinueDrains();
  lifecycle_.ContinuePreemptions();
  lifecycle_.ContinueStragglerMoves();
  dispatcher_.AccountUsage();
  rendezvous_->CheckDeadlines();  // may call the lifecycle's OnRendezvousFailed: no lock of ours held here
  ScheduleNow();
}

void JobController::ScheduleNow() { dispatcher_.ScheduleNow(); }

// ---- queues ----

void JobController::ReplaceQueues(QueueConfig config) { queues_.Replace(std::move(config)); }

}  // namespace ringmaster::coordinator
