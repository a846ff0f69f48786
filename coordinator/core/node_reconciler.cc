#include "coordinator/core/node_reconciler.h"

#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::coordinator {

NodeReconciler::NodeReconciler(NodeRegistry* nodes, JobLifecycle* jobs, const JobControllerOptions& options)
    : nodes_(nodes), jobs_(jobs), options_(options) {}

absl::StatusOr<NodeRegistrationResult> NodeReconciler::RegisterNode(const v1::NodeInfo& node,
                                                                    const std::vector<RunningRank>& running,
                                                                    bool worker_drains, const NodeProof* proof) {
  // Every process the worker runs keeps its GPU / slots until its exit is
  // reported, whatever its generation: held as the node registers.
  std::vector<RankSlot> hold;
  for (const RunningRank& r : running) {
    if (std::optional<RankSlot> slot = jobs_->SlotOf(r.job_id, r.generation, r.global_rank)) {
      hold.push_back(*std::move(slot));
    }
  }
  ASSIGN_OR_RETURN(NodeRegistration registration, nodes_->Register(node, hold, worker_drains, proof));
  const std::string& node_id = registration.node_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lost_nodes_.erase(node_id);  // it is back; reconciled below instead
  }
  NodeRegistrationResult result;
  result.registration = registration;

  using RankKey = std::tuple<std::string, int64_t, int32_t>;
  std::set<RankKey> reported;
  for (const RunningRank& r : running) {
    reported.insert({r.job_id, r.generation, r.global_rank});
    if (jobs_->RunsCurrently(r.job_id, r.generation, r.global_rank, node_id)) continue;  // keeps running
    result.stop.push_back({node_id, r.job_id, r.generation, {r.global_rank}, options_.stop_grace_period,
                           absl::StrCat("generation ", r.generation, " of job ", r.job_id, " is over")});
  }
  // Slots this node holds for ranks the worker no longer has.
  std::vector<RankSlot> vanished;
  for (RankSlot& slot : nodes_->SlotsOn(node_id)) {
    if (reported.count({slot.job_id, slot.generation, slot.global_rank}) == 0) vanished.push_back(std::move(slot));
  }
  jobs_->ReconcileVanished(node_id, node.hostname(), vanished);
  return result;
}

void NodeReconciler::AssignmentsForNode(
    const std::string& node_id, const std::function<void(const std::vector<StartOrder>&)>& at_snapshot) const {
  jobs_->AssignmentsForNode(node_id, at_snapshot);
}

void NodeReconciler::HandleLostNodes() {
  std::set<std::string> lost;
  {
    std::vector<std::string> expired = nodes_->ExpireLeases();
    std::lock_guard<std::mutex> lock(mu_);
    lost_nodes_.insert(expired.begin(), expired.end());
    lost = lost_nodes_;
  }
  for (const std::string& node_id : lost) {
    // Its ranks are presumed dead: a worker that cannot renew its lease
    // stops them. A node registered again meanwhile is reconciled instead.
    if (!nodes_->ReleaseAllIfLost(node_id)) {
      std::lock_guard<std::mutex> lock(mu_);
      lost_nodes_.erase(node_id);
      continue;
    }
    absl::StatusOr<v1::NodeInfo> info = nodes_->GetNode(node_id);
    const std::string host = info.ok() ? info->hostname() : node_id;
    const bool handled = jobs_->FailJobsOnLostNode(
        node_id, absl::StrCat("node ", host, " (", node_id, ") lost: no heartbeat for ",
                              absl::FormatDuration(nodes_->lease_duration())));
    if (handled) {
      std::lock_guard<std::mutex> lock(mu_);
      lost_nodes_.erase(node_id);
    }
  }
}

}  // namespace ringmaster::coordinator
