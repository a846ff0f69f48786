#include "coordinator/core/scheduler.h"

#include <algorithm>
#include <optional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/scheduler_pass.h"

namespace ringmaster::coordinator {

using scheduler_internal::kUnlimited;
using scheduler_internal::NodesWords;
using scheduler_internal::Pass;
using scheduler_internal::SelectorWords;
using scheduler_internal::SlotWords;

int32_t SlotsPerNode(const JobRequest& job) {
  return job.kind == SlotKind::kGpu ? job.ranks_per_node : job.ranks_per_node * job.cpus_per_rank;
}

int32_t FreeSlots(const NodeCapacity& node, SlotKind kind) {
  return kind == SlotKind::kGpu ? static_cast<int32_t>(node.free_gpu_uuids.size()) : node.free_cpu_slots;
}

bool Eligible(const JobRequest& job, const NodeCapacity& node) {
  if (job.excluded_nodes.count(node.node_id) > 0) return false;
  for (const auto& [key, value] : job.node_selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  const int32_t total =
      job.kind == SlotKind::kGpu ? static_cast<int32_t>(node.gpu_uuids.size()) : node.cpu_slots;
  return total >= SlotsPerNode(job);
}

std::optional<std::string> Unschedulable(const JobRequest& job, const std::vector<NodeCapacity>& nodes) {
  const auto eligible = std::count_if(nodes.begin(), nodes.end(), [&](const NodeCapacity& n) { return Eligible(job, n); });
  if (eligible >= job.nodes) return std::nullopt;
  std::string why = absl::StrCat("needs ", NodesWords(job.nodes), " with ", SlotWords(job), " each",
                                 SelectorWords(job), "; only ", eligible, " schedulable node", eligible == 1 ? "" : "s",
                                 " could ever hold that");
  // The likely cause on a CPU-only cluster: resources.device defaults to cuda.
  const bool gpu_anywhere = std::any_of(nodes.begin(), nodes.end(), [](const NodeCapacity& n) { return !n.gpu_uuids.empty(); });
  const bool cpu_anywhere = std::any_of(nodes.begin(), nodes.end(), [](const NodeCapacity& n) { return n.cpu_slots > 0; });
  if (job.kind == SlotKind::kGpu && !gpu_anywhere && cpu_anywhere) {
    absl::StrAppend(&why, " (no node has a GPU: set resources.device: cpu to use CPU slots)");
  }
  return why;
}
namespace scheduler_internal {

Pass::Pass(const std::vector<RunningJob>& running, const std::vector<QueueState>& queues,
           const std::vector<NodeCapacity>& nodes)
    : nodes_(nodes) {
  work_.reserve(nodes.size());
  std::map<std::string, size_t> node_index;
  for (const NodeCapacity& n : nodes) {
    node_index[n.node_id] = work_.size();
    for (const auto& label : n.labels) labelled_[label].push_back(work_.size());
    work_.push_back({&n, n.free_gpu_uuids, n.free_cpu_slots});
  }
  for (const QueueState& q : queues) {
    queue_index_.emplace(q.name, static_cast<int>(queues_.size()));
    queues_.push_back({&q, {}, 0, {0, 0}, {}, q.decayed_usage / std::max(q.weight, 1e-9)});
  }
  for (int k = 0; k < kKinds; ++k) {
    victims_on_[k].resize(nodes.size());
    coming_[k].assign(nodes.size(), 0);
    reserved_[k].assign(nodes.size(), 0);
  }
  for (const RunningJob& r : running) {
    auto q = queue_index_.find(r.queue);
    Victim v{&r, q == queue_index_.end() ? -1 : q->second, {}, 0, r.preempting};
    for (const NodeGrant& g : r.nodes) {
      const int64_t slots = r.kind == SlotKind::kGpu ? static_cast<int64_t>(g.gpu_uuids.size()) : g.cpu_slots;
      v.total += slots;
      if (auto n = node_index.find(g.node_id); n != node_index.end()) v.slots.push_back({n->second, slots});
    }
    victims_.push_back(std::move(v));
  }
  std::sort(victims_.begin(), victims_.end(), VictimBefore);
  for (size_t i = 0; i < victims_.size(); ++i) {
    const Victim& v = victims_[i];
    const int k = KindIndex(v.job->kind);
    for (const auto& [n, slots] : v.slots) {
      if (v.leaving) coming_[k][n] += slots;
      victims_on_[k][n].push_back(i);
    }
    if (!v.leaving && v.queue >= 0) queues_[v.queue].used[k] += v.total;
  }
}

ScheduleResult Pass::Run(std::vector<JobRequest> pending) {
  for (JobRequest& job : pending) {
    auto q = queue_index_.find(job.queue);
    if (q == queue_index_.end()) {
      Wait(job, absl::StrCat("queue ", job.queue, " does not exist"), false);
      continue;
    }
    // Jobs that could never start are decided first: they hold nothing back
    // and spend no quota, so they must not set their queue's place in rule 7.
    if (job.nodes < 1 || job.ranks_per_node < 1 || SlotsPerNode(job) < 1) {
      Wait(job, "invalid request: nodes and ranks_per_node must be >= 1", false);
    } else if (Shape& shape = ShapeOf(job); static_cast<int32_t>(shape.eligible.size()) < job.nodes) {
      Wait(job, *Unschedulable(job, nodes_), false);
    } else {
      queues_[q->second].jobs.push_back({std::move(job), &shape});
    }
  }
  for (QueueWork& q : queues_) {
    std::sort(q.jobs.begin(), q.jobs.end(), [](const Pending& a, const Pending& b) { return Before(a.job, b.job); });
  }
  for (int qi = NextQueue(); qi >= 0; qi = NextQueue()) {
    Pending& next = queues_[qi].jobs[queues_[qi].next++];
    Consider(qi, next.job, *next.shape);
  }
  return std::move(result_);
}

// Rule 7: guaranteed heads first, then the lowest weighted usage, then name.
int Pass::NextQueue() const {
  int best = -1;
  std::tuple<bool, double, const std::string*> best_key;
  for (int qi = 0; qi < static_cast<int>(queues_.size()); ++qi) {
    const QueueWork& q = queues_[qi];
    if (q.next >= q.jobs.size()) continue;
    std::tuple<bool, double, const std::string*> key{!Guaranteed(q, q.jobs[q.next].job), q.share, &q.state->name};
    if (best < 0 || std::get<0>(key) < std::get<0>(best_key) ||
        (std::get<0>(key) == std::get<0>(best_key) &&
         (std::get<1>(key) < std::get<1>(best_key) ||
          (std::get<1>(key) == std::get<1>(best_key) && *std::get<2>(key) < *std::get<2>(best_key))))) {
      best = qi;
      best_key = key;
    }
  }
  return best;
}

Shape& Pass::ShapeOf(const JobRequest& job) {
  const int32_t need = SlotsPerNode(job);
  auto [it, inserted] = shapes_.try_emplace({KindIndex(job.kind), need, job.node_selector, job.excluded_nodes});
  Shape& shape = it->second;
  if (inserted) {
    // A selector narrows the nodes to look at to those with its first label.
    std::vector<size_t> all;
    const std::vector<size_t>* look = &all;
    if (!job.node_selector.empty()) {
      static const std::vector<size_t> kNone;
      auto it = labelled_.find(*job.node_selector.begin());
      look = it == labelled_.end() ? &kNone : &it->second;
    } else {
      all.resize(work_.size());
      for (size_t n = 0; n < all.size(); ++n) all[n] = n;
    }
    for (size_t n : *look) {
      if (!Eligible(job, nodes_[n])) continue;
      shape.eligible.push_back(n);
      if (Free(n, job.kind) >= need) shape.fits.push_back(n);
    }
    shape.unreserved = shape.eligible;
    shape.open = shape.fits;
  }
  return shape;
}

void Pass::Consider(int qi, const JobRequest& job, Shape& shape) {
  QueueWork& q = queues_[qi];
  const int k = KindIndex(job.kind);
  if (!q.over_quota[k].empty()) {
    return Wait(job, absl::StrCat("waiting behind ", q.over_quota[k], " in queue ", q.state->name,
                                  ", which waits for its queue's quota"), true);
  }
  const int64_t limit = Limit(*q.state, job.kind);
  const bool over_limit = q.used[k] + Demand(job) > limit;
  if (!over_limit && TryPlace(qi, job, shape)) return;
  const bool reclaim = !over_limit && Guaranteed(q, job);
  if (reclaim || q.state->preempt_within) {
    if (std::optional<Plan> plan = PlanPreemption(qi, job, shape, reclaim, q.state->preempt_within)) {
      return Commit(qi, job, *plan);
    }
  }
  if (over_limit) {
    const int64_t nominal = Nominal(*q.state, job.kind);
    const std::string unit = UnitWords(job.kind);
    std::string message =
        limit == nominal
            ? absl::StrCat("queue ", q.state->name, " is at its quota: ", q.used[k], " of ", nominal, " ", unit,
                           " in use")
            : absl::StrCat("queue ", q.state->name, " is at its borrowing limit: ",
                           std::max<int64_t>(0, q.used[k] - nominal), " of ", limit - nominal, " ", unit,
                           " beyond its quota of ", nominal, " in use");
    absl::StrAppend(&message, "; this job needs ", Demand(job), " more");
    q.over_quota[k] = job.job_id;
    return Wait(job, std::move(message), true);
  }
  Block(job, shape);
}

// Rules 2, 4, 5: best fit on N unreserved nodes with room, or nothing.
bool Pass::TryPlace(int qi, const JobRequest& job, Shape& shape) {
  const int32_t need = SlotsPerNode(job);
  const int k = KindIndex(job.kind);
  auto gone = [&](size_t n) { return reserved_[k][n] || Free(n, job.kind) < need; };
  shape.open.erase(std::remove_if(shape.open.begin(), shape.open.end(), gone), shape.open.end());
  if (static_cast<int32_t>(shape.open.size()) < job.nodes) return false;
  std::vector<size_t> chosen = shape.open;
  auto best_fit = [&](size_t a, size_t b) {
    const int64_t fa = Free(a, job.kind), fb = Free(b, job.kind);
    return fa != fb ? fa < fb : LessByHost(a, b);
  };
  std::nth_element(chosen.begin(), chosen.begin() + (job.nodes - 1), chosen.end(), best_fit);
  chosen.resize(job.nodes);
  std::sort(chosen.begin(), chosen.end(), [&](size_t a, size_t b) { return LessByHost(a, b); });
  JobPlacement placement{job.job_id, {}, !first_blocked_.empty()};
  for (size_t n : chosen) {
    WorkNode& w = work_[n];
    NodeGrant grant{w.node->node_id, w.node->hostname, {}, 0};
    if (job.kind == SlotKind::kGpu) {
      grant.gpu_uuids.assign(w.free_gpus.begin(), w.free_gpus.begin() + need);
      w.free_gpus.erase(w.free_gpus.begin(), w.free_gpus.begin() + need);
    } else {
      grant.cpu_slots = need;
      w.free_cpu -= need;
    }
    placement.nodes.push_back(std::move(grant));
  }
  queues_[qi].used[k] += Demand(job);
  result_.placed.push_back(std::move(placement));
  return true;
}

bool Pass::LessByHost(size_t a, size_t b) const {
  const NodeCapacity& na = *work_[a].node;
  const NodeCapacity& nb = *work_[b].node;
  if (na.hostname != nb.hostname) return na.hostname < nb.hostname;
  return na.node_id < nb.node_id;
}

// Eligible nodes with room now, reservations ignored; counts only up to N.
int32_t Pass::CountFits(const JobRequest& job, Shape& shape) {
  const int32_t need = SlotsPerNode(job);
  int32_t found = 0;
  for (size_t i = 0; i < shape.fits.size() && found < job.nodes;) {
    if (Free(shape.fits[i], job.kind) >= need) {
      ++found, ++i;
    } else {
      shape.fits[i] = shape.fits.back();
      shape.fits.pop_back();
    }
  }
  return found;
}

// A feasible job that cannot start: it reserves every eligible node (rule 4).
void Pass::Block(const JobRequest& job, Shape& shape) {
  const int32_t fits = CountFits(job, shape);
  std::string message;
  if (fits >= job.nodes) {
    message = absl::StrCat("waiting behind ", first_blocked_, ", which may use the free nodes");
  } else {
    message = absl::StrCat("waiting for ", NodesWords(job.nodes), " with ", SlotWords(job), " each",
                           SelectorWords(job), "; ", fits, " such node", fits == 1 ? "" : "s", " now");
  }
  Wait(job, std::move(message), true);
  if (first_blocked_.empty()) first_blocked_ = job.job_id;
  if (shape.reserved_all) return;  // reservations only grow within a pass
  shape.reserved_all = true;
  for (size_t n : shape.eligible) reserved_[KindIndex(job.kind)][n] = 1;
}

}  // namespace scheduler_internal

ScheduleResult Schedule(std::vector<JobRequest> queue, const std::vector<NodeCapacity>& nodes) {
  for (JobRequest& job : queue) job.queue.clear();
  QueueState everything;
  everything.nominal_gpus = everything.nominal_cpus = kUnlimited;
  return ScheduleQueues(std::move(queue), {}, {everything}, nodes);
}

ScheduleResult ScheduleQueues(std::vector<JobRequest> pending, const std::vector<RunningJob>& running,
                              const std::vector<QueueState>& queues, const std::vector<NodeCapacity>& nodes) {
  return Pass(running, queues, nodes).Run(std::move(pending));
}

}  // namespace ringmaster::coordinator
