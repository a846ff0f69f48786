// The scheduler: choosing whom to preempt (rule 8 of scheduler.h).
#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/scheduler_pass.h"

namespace ringmaster::coordinator::scheduler_internal {

// May `v` leave for `job`? `taken`: slots already picked per victim queue.
bool Pass::MayPreempt(int qi, const JobRequest& job, const Victim& v, bool reclaim, bool within,
                      const std::map<int, int64_t>& taken) const {
  if (v.leaving || v.queue < 0 || v.job->kind != job.kind) return false;
  if (v.queue == qi) return within && v.job->priority < job.priority;
  if (!reclaim) return false;
  auto t = taken.find(v.queue);
  const int64_t used = queues_[v.queue].used[KindIndex(job.kind)] - (t == taken.end() ? 0 : t->second);
  // Only a queue that borrows gives slots back, and only while it still
  // does: a victim is taken whole (a gang), so the last one may take its
  // queue below its nominal quota, as in Kueue (a job that borrowed even one
  // slot is a borrower).
  return used > Nominal(*queues_[v.queue].state, job.kind);
}

// Picks victims with slots on node `n`, in rule 8 order, until `missing`
// slots are freed there. On failure leaves its arguments as they were.
bool Pass::PickOnNode(int qi, const JobRequest& job, size_t n, int64_t missing, bool reclaim, bool within,
                      std::map<int, int64_t>& taken, std::map<size_t, int64_t>& freed,
                      std::vector<size_t>& picked) const {
  std::map<int, int64_t> try_taken = taken;
  std::map<size_t, int64_t> try_freed = freed;
  std::vector<size_t> try_picked;
  for (size_t vi : victims_on_[KindIndex(job.kind)][n]) {
    if (missing <= 0) break;
    const Victim& v = victims_[vi];
    if (std::find(picked.begin(), picked.end(), vi) != picked.end()) continue;
    if (!MayPreempt(qi, job, v, reclaim, within, try_taken)) continue;
    try_picked.push_back(vi);
    try_taken[v.queue] += v.total;
    for (const auto& [m, slots] : v.slots) {
      try_freed[m] += slots;
      if (m == n) missing -= slots;
    }
  }
  if (missing > 0) return false;
  taken = std::move(try_taken);
  freed = std::move(try_freed);
  picked.insert(picked.end(), try_picked.begin(), try_picked.end());
  return true;
}

// Rule 8: the fewest victims (greedy, node by node) that let `job` start as
// a gang on nodes no blocked job ahead reserved; nullopt when even every
// permitted victim could not.
std::optional<Plan> Pass::PlanPreemption(int qi, const JobRequest& job, Shape& shape, bool reclaim, bool within) {
  const int k = KindIndex(job.kind);
  const int64_t need = SlotsPerNode(job);
  shape.unreserved.erase(std::remove_if(shape.unreserved.begin(), shape.unreserved.end(),
                                        [&](size_t n) { return reserved_[k][n] != 0; }),
                         shape.unreserved.end());
  const std::map<int, int64_t> none;
  // base: free now + coming free; first: its first permitted victim (rule 8 order).
  struct Candidate { size_t node; int64_t base; size_t first; };
  std::vector<Candidate> viable;
  for (size_t n : shape.unreserved) {
    Candidate c{n, Free(n, job.kind) + coming_[k][n], 0};
    int64_t upper = c.base;
    for (size_t vi : victims_on_[k][n]) {
      if (upper >= need) break;
      if (!MayPreempt(qi, job, victims_[vi], reclaim, within, none)) continue;
      if (upper == c.base) c.first = vi;
      for (const auto& [m, slots] : victims_[vi].slots) upper += m == n ? slots : 0;
    }
    if (upper >= need) viable.push_back(c);
  }
  if (static_cast<int32_t>(viable.size()) < job.nodes) return std::nullopt;
  // Nodes that need no new victim first; then the nodes whose victims come
  // first in rule 8 order; then the smallest shortfall.
  std::sort(viable.begin(), viable.end(), [&](const Candidate& a, const Candidate& b) {
    const bool ra = a.base >= need, rb = b.base >= need;
    if (ra != rb) return ra;
    if (!ra && a.first != b.first) return a.first < b.first;
    if (a.base != b.base) return a.base > b.base;
    return LessByHost(a.node, b.node);
  });
  Plan plan;
  std::map<int, int64_t> taken;
  std::map<size_t, int64_t> freed;
  for (const Candidate& c : viable) {
    if (static_cast<int32_t>(plan.nodes.size()) == job.nodes) break;
    const int64_t missing = need - c.base - freed[c.node];
    if (missing <= 0 || PickOnNode(qi, job, c.node, missing, reclaim, within, taken, freed, plan.victims)) {
      plan.nodes.push_back(c.node);
    }
  }
  if (static_cast<int32_t>(plan.nodes.size()) < job.nodes) return std::nullopt;
  // Within its queue, the job must also fit the quota once its victims left.
  QueueWork& q = queues_[qi];
  const int64_t limit = Limit(*q.state, job.kind);
  for (size_t vi = 0; vi < victims_.size() && q.used[k] - taken[qi] + Demand(job) > limit; ++vi) {
    if (std::find(plan.victims.begin(), plan.victims.end(), vi) != plan.victims.end()) continue;
    if (victims_[vi].queue != qi || !MayPreempt(qi, job, victims_[vi], false, within, taken)) continue;
    plan.victims.push_back(vi);
    taken[qi] += victims_[vi].total;
  }
  if (q.used[k] - taken[qi] + Demand(job) > limit) return std::nullopt;
  for (size_t n : plan.nodes) {
    for (size_t vi : victims_on_[k][n]) {
      // Its own previous generation, still leaving, is not a preemption it waits for.
      if (!victims_[vi].leaving || victims_[vi].job->job_id == job.job_id) continue;
      if (std::find(plan.awaited.begin(), plan.awaited.end(), vi) == plan.awaited.end()) plan.awaited.push_back(vi);
    }
  }
  if (plan.victims.empty() && plan.awaited.empty()) return std::nullopt;  // blocked by capacity alone
  std::sort(plan.victims.begin(), plan.victims.end());  // rule 8 order (victims_ is sorted)
  return plan;
}

// Asks the plan's victims to leave; the job waits for them on its nodes.
void Pass::Commit(int qi, const JobRequest& job, const Plan& plan) {
  const int k = KindIndex(job.kind);
  const QueueWork& q = queues_[qi];
  std::vector<std::string> names;
  for (size_t vi : plan.awaited) names.push_back(victims_[vi].job->job_id);
  for (size_t vi : plan.victims) {
    Victim& v = victims_[vi];
    QueueWork& owner = queues_[v.queue];
    std::string reason;
    if (v.queue == qi) {
      reason = absl::StrCat(job.job_id, " (priority ", job.priority, ") preempts it (priority ", v.job->priority,
                            ") within queue ", q.state->name);
    } else {
      reason = absl::StrCat("queue ", q.state->name, " reclaims its quota for ", job.job_id, " (queue ",
                            owner.state->name, " borrows ", owner.used[k] - Nominal(*owner.state, job.kind), " ",
                            UnitWords(job.kind), ")");
    }
    result_.preempt.push_back({v.job->job_id, job.job_id, std::move(reason)});
    names.push_back(v.job->job_id);
    v.leaving = true;
    owner.used[k] -= v.total;
    for (const auto& [n, slots] : v.slots) coming_[k][n] += slots;
  }
  std::sort(names.begin(), names.end());
  Wait(job, absl::StrCat("waiting for preempted ", names.size() == 1 ? "job " : "jobs ", absl::StrJoin(names, ", "),
                         " to leave (", q.state->name, Guaranteed(q, job) ? " reclaims its quota" :
                         " lets higher priority go first", ")"),
       true);
  if (first_blocked_.empty()) first_blocked_ = job.job_id;
  for (size_t n : plan.nodes) reserved_[k][n] = 1;
}

}  // namespace ringmaster::coordinator::scheduler_internal
