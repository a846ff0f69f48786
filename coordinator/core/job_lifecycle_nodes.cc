// JobLifecycle: what the Dispatcher and the NodeReconciler ask of it.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/core/job_lifecycle.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {

JobRequest RequestFor(const JobRecord& r) {
  const v1::ResourceSpec& res = r.job.spec().resources();
  JobRequest q;
  q.job_id = r.job.id();
  q.priority = r.job.spec().priority();
  q.submit_seq = r.submit_seq;
  q.nodes = res.nodes();
  q.ranks_per_node = res.ranks_per_node();
  q.kind = res.device() == v1::ResourceSpec::CPU ? SlotKind::kCpu : SlotKind::kGpu;
  q.cpus_per_rank = res.cpus_per_rank();
  q.node_selector.insert(res.node_selector().begin(), res.node_selector().end());
  q.queue = QueueOf(r.job.spec());
  return q;
}

// ---- for the Dispatcher ----

std::set<std::string> JobLifecycle::ExcludedNodesLocked(const Entry& entry,
                                                        const std::vector<NodeCapacity>& capacity) const {
  std::set<std::string> excluded = entry.strikes.Excluded(clock_->Now(), options_.node_strikes);
  excluded.merge(StragglerAvoidedLocked(entry));
  const auto usable = std::count_if(capacity.begin(), capacity.end(),
                                    [&](const NodeCapacity& n) { return excluded.count(n.node_id) == 0; });
  if (usable < entry.record.job.spec().resources().nodes()) excluded.clear();  // it needs them
  return excluded;
}

bool JobLifecycle::HasWaitingJobs() const {
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    std::lock_guard<std::mutex> lock(found->mu);
    const v1::JobState s = found->record.job.state();
    if (s == v1::JOB_STATE_QUEUED || s == v1::JOB_STATE_RESTARTING) return true;
  }
  return false;
}

std::vector<std::string> JobLifecycle::WaitingQueues() const {
  std::vector<std::string> queues;
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    std::lock_guard<std::mutex> lock(found->mu);
    const v1::JobState s = found->record.job.state();
    if (s == v1::JOB_STATE_QUEUED || s == v1::JOB_STATE_RESTARTING) queues.push_back(QueueOf(found->record.job.spec()));
  }
  return queues;
}

std::vector<JobLifecycle::Waiting> JobLifecycle::WaitingJobs(const std::vector<NodeCapacity>& capacity) const {
  std::vector<Waiting> waiting;
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    const Entry& entry = *found;
    std::lock_guard<std::mutex> lock(entry.mu);
    const v1::JobState s = entry.record.job.state();
    if (s != v1::JOB_STATE_QUEUED && s != v1::JOB_STATE_RESTARTING) continue;
    Waiting w;
    w.request = RequestFor(entry.record);
    w.request.excluded_nodes = ExcludedNodesLocked(entry, capacity);
    w.resources = entry.record.job.spec().resources();
    w.pipeline = entry.record.job.spec().parallelism().pipeline();
    const v1::RestartPolicy& restart = entry.record.job.spec().restart();
    w.min_nodes = restart.has_elastic() ? restart.elastic().min_nodes() : 0;
    w.generation = entry.record.job.generation();
    w.program = entry.record.job.spec().has_program();
    waiting.push_back(std::move(w));
  }
  return waiting;
}

void JobLifecycle::SetWaitingMessage(const std::string& job_id, const std::string& message,
                                     const std::string& unschedulable) {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return;
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  const v1::JobState s = entry.record.job.state();
  if (s != v1::JOB_STATE_QUEUED && s != v1::JOB_STATE_RESTARTING) return;
  const std::string text = s == v1::JOB_STATE_RESTARTING ? absl::StrCat("restart pending: ", message) : message;
  if (entry.record.job.message() == text && entry.record.job.unschedulable() == unschedulable) return;
  // In memory; stored with the next transition.
  entry.record.job.set_message(text);
  entry.record.job.set_unschedulable(unschedulable);
  NotifyJobLocked(entry, {});
}

// ---- for the NodeReconciler ----

std::optional<RankSlot> JobLifecycle::SlotOf(const std::string& job_id, int64_t generation,
                                             int32_t global_rank) const {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return std::nullopt;
  v1::JobSpec spec;
  std::optional<v1::Placement> placement;
  {
    std::lock_guard<std::mutex> lock(found->mu);
    spec = found->record.job.spec();
    if (generation == found->record.job.generation()) placement = found->record.job.placement();
  }
  if (!placement.has_value()) {
    absl::StatusOr<v1::Placement> stored = store_->LoadPlacement(job_id, generation);  // no lock held
    if (!stored.ok()) return std::nullopt;
    placement = *std::move(stored);
  }
  if (global_rank < 0 || global_rank >= placement->ranks_size()) return std::nullopt;
  const v1::RankAssignment& r = placement->ranks(global_rank);
  const bool cuda = spec.resources().device() != v1::ResourceSpec::CPU;
  return RankSlot{job_id, generation, global_rank, r.gpu_uuid(), cuda ? 0 : spec.resources().cpus_per_rank()};
}

bool JobLifecycle::RunsCurrently(const std::string& job_id, int64_t generation, int32_t global_rank,
                                 const std::string& node_id) const {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return false;
  std::lock_guard<std::mutex> lock(found->mu);
  const v1::Job& job = found->record.job;
  const v1::Placement& p = job.placement();
  return generation == job.generation() && ActiveState(job.state()) && global_rank >= 0 &&
         global_rank < p.ranks_size() && p.ranks(global_rank).node_id() == node_id;
}

absl::Status JobLifecycle::CheckPlacedOn(const std::string& node_id, const std::string& job_id, int64_t generation,
                                         const std::vector<int32_t>& ranks) const {
  auto denied = [&](int32_t rank) {
    return absl::PermissionDeniedError(absl::StrCat("node ", node_id, " has no rank",
                                                    rank < 0 ? std::string() : absl::StrCat(" ", rank), " of job ",
                                                    job_id, " (generation ", generation,
                                                    "): a node acts only for the ranks placed on it"));
  };
  // OK, or the refusal naming the first rank (of `ranks`) not on the node.
  auto check = [&](const v1::Placement& placement) {
    auto on_node = [&](int32_t rank) {
      return rank >= 0 && rank < placement.ranks_size() && placement.ranks(rank).node_id() == node_id;
    };
    if (ranks.empty()) {
      for (int32_t r = 0; r < placement.ranks_size(); ++r) {
        if (on_node(r)) return absl::OkStatus();
      }
      return denied(-1);
    }
    for (int32_t rank : ranks) {
      if (!on_node(rank)) return denied(rank);
    }
    return absl::OkStatus();
  };
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return JobNotFoundError(job_id);
  const int32_t first = ranks.empty() ? -1 : ranks.front();
  if (generation < 1) return denied(first);
  {
    std::lock_guard<std::mutex> lock(found->mu);
    const v1::Job& job = found->record.job;
    if (generation > job.generation()) return denied(first);
    if (generation == job.generation()) return check(job.placement());  // no copy: progress reports come often
  }
  absl::StatusOr<v1::Placement> stored = store_->LoadPlacement(job_id, generation);  // no lock held
  if (stored.status().code() == absl::StatusCode::kNotFound) return denied(first);
  if (!stored.ok()) return stored.status();
  return check(*stored);
}

absl::Status JobLifecycle::CheckHostsJob(const std::string& node_id, const std::string& job_id) const {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return JobNotFoundError(job_id);
  int64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(found->mu);
    generation = found->record.job.generation();
  }
  // A generation that moved on meanwhile is checked against its stored placement: still only its nodes.
  return CheckPlacedOn(node_id, job_id, generation, {});
}

void JobLifecycle::ReconcileVanished(const std::string& node_id, const std::string& hostname,
                                     const std::vector<RankSlot>& vanished) {
  std::map<std::string, std::vector<const RankSlot*>> by_job;
  for (const RankSlot& slot : vanished) by_job[slot.job_id].push_back(&slot);
  for (const auto& [job_id, slots] : by_job) {
    std::shared_ptr<Entry> found = Find(job_id);
    std::unique_lock<std::mutex> lock;
    if (found != nullptr) lock = std::unique_lock<std::mutex>(found->mu);
    int32_t missing = -1;  // a rank of the current, RUNNING generation that is gone
    for (const RankSlot* slot : slots) {
      const bool current = found != nullptr && slot->generation == found->record.job.generation() &&
                           ActiveState(found->record.job.state());
      // PLACED / STARTING: the start order is sent again when the session
      // opens; the slot stays reserved for it.
      if (current && found->record.job.state() != v1::JOB_STATE_RUNNING) continue;
      nodes_->Release(node_id, slot->job_id, slot->generation, slot->global_rank);  // gone with the old worker
      if (current && missing < 0) missing = slot->global_rank;
    }
    if (missing < 0) continue;
    absl::Status s = FailGenerationLocked(
        *found, {v1::JOB_EVENT_KIND_RANK_EXITED,
                 absl::StrCat("rank ", missing, " is not running after the worker on ", hostname, " registered again"),
                 missing, node_id});
    if (!s.ok()) spdlog::error("job {}: failure not applied: {}", job_id, s.ToString());
  }
}

bool JobLifecycle::FailJobsOnLostNode(const std::string& node_id, const std::string& why) {
  bool handled = true;
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    Entry& entry = *found;
    std::lock_guard<std::mutex> lock(entry.mu);
    const v1::Job& job = entry.record.job;
    if (!ActiveState(job.state())) continue;
    bool here = false;
    for (const v1::RankAssignment& r : job.placement().ranks()) here |= r.node_id() == node_id;
    if (!here) continue;
    // A node back already (registered again since) gets its stop orders.
    absl::StatusOr<v1::NodeInfo> info = nodes_->GetNode(node_id);
    const bool still_lost = !info.ok() || info->state() == v1::NODE_STATE_LOST;
    absl::Status s = FailGenerationLocked(
        entry, {v1::JOB_EVENT_KIND_NODE_LOST, why, -1, node_id, /*lost_node=*/still_lost ? node_id : ""});
    if (!s.ok()) {
      spdlog::error("job {}: node loss not applied (retrying next tick): {}", job.id(), s.ToString());
      handled = false;
    }
  }
  return handled;
}

void JobLifecycle::AssignmentsForNode(const std::string& node_id,
                                      const std::function<void(const std::vector<StartOrder>&)>& at_snapshot) const {
  // Every job's lock, in id order (AllEntries is ordered by id): the one
  // place that holds several. All of them, not only those placed on the
  // node: a job placed there while the session attaches would otherwise
  // send its start order to no session and be missing from the snapshot.
  // Session opens are rare; each waits for the transitions in flight.
  std::vector<std::unique_lock<std::mutex>> held;
  std::vector<StartOrder> orders;
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    held.emplace_back(found->mu);
    const v1::Job& job = found->record.job;
    if (!ActiveState(job.state())) continue;
    v1::Placement slice = job.placement();
    slice.clear_ranks();
    for (const v1::RankAssignment& r : job.placement().ranks()) {
      if (r.node_id() == node_id) *slice.add_ranks() = r;
    }
    if (slice.ranks_size() == 0) continue;
    orders.push_back(StartOrderLocked(*found, node_id, std::move(slice)));
  }
  at_snapshot(orders);
}

}  // namespace ringmaster::coordinator
