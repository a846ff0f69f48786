// JobController: recovery after a coordinator restart, worker
// (re)registration, lost nodes, assignments per node.
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/job_state_machine.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

bool Active(v1::JobState s) {
  return s == v1::JOB_STATE_PLACED || s == v1::JOB_STATE_STARTING || s == v1::JOB_STATE_RUNNING;
}

// The slots a placement's ranks hold on `node_id` ("" : every node).
std::vector<RankSlot> SlotsOf(const std::string& job_id, const v1::Job& job, const v1::Placement& p,
                              const std::string& node_id, int32_t only_rank = -1) {
  const bool cuda = job.spec().resources().device() != v1::ResourceSpec::CPU;
  std::vector<RankSlot> slots;
  for (const v1::RankAssignment& r : p.ranks()) {
    if (!node_id.empty() && r.node_id() != node_id) continue;
    if (only_rank >= 0 && r.global_rank() != only_rank) continue;
    slots.push_back({job_id, p.generation(), r.global_rank(), r.gpu_uuid(),
                     cuda ? 0 : job.spec().resources().cpus_per_rank()});
  }
  return slots;
}

bool OnNode(const v1::Placement& p, const std::string& node_id, int32_t rank) {
  return rank >= 0 && rank < p.ranks_size() && p.ranks(rank).node_id() == node_id;
}

}  // namespace

absl::Status JobController::Recover() {
  ASSIGN_OR_RETURN(std::vector<JobRecord> records, store_->LoadJobs());
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = clock_->Now();
  for (JobRecord& record : records) {
    const std::string id = record.job.id();
    JobEntry& entry = jobs_[id];
    entry.record = std::move(record);
    const v1::Job& job = entry.record.job;
    const v1::JobState state = job.state();
    if (job.generation() == 0) continue;
    if (!IsTerminal(state) && state != v1::JOB_STATE_QUEUED) {
      // The ranks may still be running: their slots are held until the
      // workers say otherwise (RegisterNode) or report their exits.
      std::map<std::string, std::vector<RankSlot>> by_node;
      for (RankSlot& s : SlotsOf(id, job, job.placement(), "")) {
        by_node[job.placement().ranks(s.global_rank).node_id()].push_back(std::move(s));
      }
      for (const auto& [node_id, slots] : by_node) {
        if (absl::Status s = nodes_->Reserve(node_id, slots); !s.ok()) {
          spdlog::warn("job {}: slots on {} not re-reserved: {}", id, node_id, s.ToString());
        }
      }
    }
    entry.last_progress = now;
    entry.rendezvous_deadline = now + options_.rendezvous_timeout;
    if (state == v1::JOB_STATE_RUNNING) {
      // Past its rendezvous: it continues. Fencing keeps working.
      rendezvous_->BeginGeneration(id, job.generation(), job.placement().world_size(), entry.rendezvous_deadline,
                                   /*already_complete=*/true);
      v1::JobEvent event = MakeEvent(entry, v1::JOB_EVENT_KIND_RECOVERED, v1::JOB_STATE_RUNNING,
                                     absl::StrCat("coordinator restarted; generation ", job.generation(), " continues"));
      RETURN_IF_ERROR(CommitLocked(entry, entry.record, {event}));
    } else if (state == v1::JOB_STATE_PLACED || state == v1::JOB_STATE_STARTING) {
      // Its rendezvous state (published NCCL ids, keys) died with the old
      // coordinator: start the generation again.
      RETURN_IF_ERROR(FailGenerationLocked(
          entry, {v1::JOB_EVENT_KIND_RECOVERED,
                  absl::StrCat("coordinator restarted during the rendezvous of generation ", job.generation())}));
    } else {
      rendezvous_->EndGeneration(id, job.generation());  // RESTARTING or terminal: fenced
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeRegistrationResult> JobController::RegisterNode(const v1::NodeInfo& node,
                                                                   const std::vector<RunningRank>& running) {
  // Under our lock from the registration on: the node must not be scheduled
  // before the slots of ranks still running there are accounted for.
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(NodeRegistration registration, nodes_->Register(node));
  const std::string& node_id = registration.node_id;
  lost_nodes_.erase(node_id);  // it is back; reconcile below instead
  NodeRegistrationResult result;
  result.registration = registration;

  using RankKey = std::tuple<std::string, int64_t, int32_t>;
  std::set<RankKey> reported;
  for (const RunningRank& r : running) {
    reported.insert({r.job_id, r.generation, r.global_rank});
    const JobEntry* entry = FindLocked(r.job_id);
    if (entry != nullptr && r.generation == entry->record.job.generation() && Active(entry->record.job.state()) &&
        OnNode(entry->record.job.placement(), node_id, r.global_rank)) {
      continue;  // current: keep running
    }
    result.stop.push_back({node_id, r.job_id, r.generation, {r.global_rank}, options_.stop_grace_period,
                           absl::StrCat("generation ", r.generation, " of job ", r.job_id, " is over")});
    // Until its exit is reported the process still holds its GPU / slots.
    if (entry == nullptr) continue;
    absl::StatusOr<v1::Placement> p = r.generation == entry->record.job.generation()
                                          ? absl::StatusOr<v1::Placement>(entry->record.job.placement())
                                          : store_->LoadPlacement(r.job_id, r.generation);
    if (p.ok()) nodes_->Reserve(node_id, SlotsOf(r.job_id, entry->record.job, *p, node_id, r.global_rank)).IgnoreError();
  }

  // Slots this node holds for ranks the worker no longer has.
  std::map<std::string, int32_t> vanished;  // job -> a missing rank of its current, RUNNING generation
  for (const RankSlot& slot : nodes_->SlotsOn(node_id)) {
    if (reported.count({slot.job_id, slot.generation, slot.global_rank}) != 0) continue;
    JobEntry* entry = FindLocked(slot.job_id);
    const bool current = entry != nullptr && slot.generation == entry->record.job.generation() &&
                         Active(entry->record.job.state());
    // PLACED / STARTING: the start order is sent again when the session
    // opens; the slot stays reserved for it.
    if (current && entry->record.job.state() != v1::JOB_STATE_RUNNING) continue;
    nodes_->Release(node_id, slot.job_id, slot.generation, slot.global_rank);  // gone with the old worker
    if (current) vanished.emplace(slot.job_id, slot.global_rank);
  }
  for (const auto& [job_id, rank] : vanished) {
    JobEntry& entry = jobs_.at(job_id);
    absl::Status s = FailGenerationLocked(
        entry, {v1::JOB_EVENT_KIND_RANK_EXITED,
                absl::StrCat("rank ", rank, " is not running after the worker on ", node.hostname(),
                             " registered again"),
                rank, node_id});
    if (!s.ok()) spdlog::error("job {}: failure not applied: {}", job_id, s.ToString());
  }
  return result;
}

std::vector<StartOrder> JobController::AssignmentsForNode(const std::string& node_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return AssignmentsLocked(node_id);
}

void JobController::AssignmentsForNode(const std::string& node_id,
                                       const std::function<void(const std::vector<StartOrder>&)>& at_snapshot) const {
  std::lock_guard<std::mutex> lock(mu_);
  at_snapshot(AssignmentsLocked(node_id));
}

std::vector<StartOrder> JobController::AssignmentsLocked(const std::string& node_id) const {
  std::vector<StartOrder> orders;
  for (const auto& [id, entry] : jobs_) {
    if (!Active(entry.record.job.state())) continue;
    v1::Placement slice = entry.record.job.placement();
    slice.clear_ranks();
    for (const v1::RankAssignment& r : entry.record.job.placement().ranks()) {
      if (r.node_id() == node_id) *slice.add_ranks() = r;
    }
    if (slice.ranks_size() > 0) orders.push_back(StartOrderLocked(entry, node_id, std::move(slice)));
  }
  return orders;
}

void JobController::HandleLostNodesLocked() {
  for (std::string& id : nodes_->ExpireLeases()) lost_nodes_.insert(std::move(id));
  for (auto it = lost_nodes_.begin(); it != lost_nodes_.end();) {
    const std::string node_id = *it;
    absl::StatusOr<v1::NodeInfo> info = nodes_->GetNode(node_id);
    const std::string host = info.ok() ? info->hostname() : node_id;
    // Its ranks are presumed dead: a worker that cannot renew its lease
    // stops them.
    nodes_->ReleaseAllOn(node_id);
    bool handled = true;
    for (auto& [job_id, entry] : jobs_) {
      const v1::Job& job = entry.record.job;
      if (!Active(job.state())) continue;
      bool here = false;
      for (const v1::RankAssignment& r : job.placement().ranks()) here |= r.node_id() == node_id;
      if (!here) continue;
      absl::Status s = FailGenerationLocked(
          entry, {v1::JOB_EVENT_KIND_NODE_LOST,
                  absl::StrCat("node ", host, " (", node_id, ") lost: no heartbeat for ",
                               absl::FormatDuration(nodes_->lease_duration())),
                  -1, node_id, /*lost_node=*/node_id});
      if (!s.ok()) {
        spdlog::error("job {}: node loss not applied (retrying next tick): {}", job_id, s.ToString());
        handled = false;
      }
    }
    it = handled ? lost_nodes_.erase(it) : std::next(it);
  }
}

}  // namespace ringmaster::coordinator
