#include "coordinator/core/scheduler.h"

#include <algorithm>
#include <optional>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::coordinator {
namespace {

// The scheduler's working copy of one node.
struct WorkNode {
  const NodeCapacity* node;
  std::vector<std::string> free_gpus;  // by index
  int32_t free_cpu;
};

std::string SlotWords(const JobRequest& job) {
  if (job.kind == SlotKind::kGpu) {
    return absl::StrCat(job.ranks_per_node, job.ranks_per_node == 1 ? " free GPU" : " free GPUs");
  }
  return absl::StrCat(SlotsPerNode(job), " free CPU slots");
}

std::string SelectorWords(const JobRequest& job) {
  if (job.node_selector.empty()) return "";
  std::vector<std::string> parts;
  for (const auto& [k, v] : job.node_selector) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrCat(" labelled ", absl::StrJoin(parts, ","));
}

std::string NodesWords(int n) { return absl::StrCat(n, n == 1 ? " node" : " nodes"); }

bool Before(const JobRequest& a, const JobRequest& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.submit_seq != b.submit_seq) return a.submit_seq < b.submit_seq;
  return a.job_id < b.job_id;
}

int32_t WorkFree(const WorkNode& w, SlotKind kind) {
  return kind == SlotKind::kGpu ? static_cast<int32_t>(w.free_gpus.size()) : w.free_cpu;
}

}  // namespace

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

namespace {

constexpr int64_t kUnlimited = int64_t{1} << 50;
constexpr int kKinds = 2;

int KindIndex(SlotKind kind) { return kind == SlotKind::kGpu ? 0 : 1; }
std::string UnitWords(SlotKind kind) { return kind == SlotKind::kGpu ? "GPUs" : "CPU slots"; }
int64_t Demand(const JobRequest& job) { return int64_t{job.nodes} * SlotsPerNode(job); }
int64_t Nominal(const QueueState& q, SlotKind kind) {
  return kind == SlotKind::kGpu ? q.nominal_gpus : q.nominal_cpus;
}
int64_t Limit(const QueueState& q, SlotKind kind) {
  return Nominal(q, kind) + (kind == SlotKind::kGpu ? q.borrow_gpus : q.borrow_cpus);
}

// Jobs with the same key have the same eligible nodes (rule 3).
using ShapeKey =
    std::tuple<int, int32_t, std::map<std::string, std::string>, std::set<std::string>>;

// Node lists for one shape. Within a pass reservations only grow and free
// slots only shrink, so each list is pruned lazily and never regrows.
struct Shape {
  std::vector<size_t> eligible;    // node indices
  std::vector<size_t> unreserved;  // eligible, not reserved for the kind
  std::vector<size_t> open;        // unreserved, with room for the job now
  std::vector<size_t> fits;        // eligible, with room now (reservations ignored)
  bool reserved_all = false;       // a blocked job of this shape reserved `eligible`
};

struct Pending {
  JobRequest job;
  Shape* shape;
};

// A running job, as a possible victim.
struct Victim {
  const RunningJob* job;
  int queue;  // index into queues; -1 when unknown (never a victim)
  std::vector<std::pair<size_t, int64_t>> slots;  // (node index, slots) of its kind
  int64_t total = 0;
  bool leaving = false;  // preempting already, or picked in this pass
};

bool VictimBefore(const Victim& a, const Victim& b) {
  if (a.job->priority != b.job->priority) return a.job->priority < b.job->priority;
  if (a.job->start_seq != b.job->start_seq) return a.job->start_seq > b.job->start_seq;
  return a.job->job_id < b.job->job_id;
}

struct QueueWork {
  const QueueState* state;
  std::vector<Pending> jobs;  // rule 1 order
  size_t next = 0;
  int64_t used[kKinds] = {0, 0};  // rule 6 usage
  std::string over_quota[kKinds];  // first job of each kind over the limit
  double share = 0;
};

// A preemption plan for one blocked job (rule 8).
struct Plan {
  std::vector<size_t> nodes;    // the nodes it will use
  std::vector<size_t> victims;  // new victims, rule 8 order
  std::vector<size_t> awaited;  // victims already leaving from those nodes
};

// One scheduling pass: the working state of rules 1-8.
class Pass {
 public:
  Pass(const std::vector<RunningJob>& running, const std::vector<QueueState>& queues,
       const std::vector<NodeCapacity>& nodes);
  ScheduleResult Run(std::vector<JobRequest> pending);

 private:
  int NextQueue() const;
  bool Guaranteed(const QueueWork& q, const JobRequest& job) const {
    return q.used[KindIndex(job.kind)] + Demand(job) <= Nominal(*q.state, job.kind);
  }
  void Consider(int qi, const JobRequest& job, Shape& shape);
  Shape& ShapeOf(const JobRequest& job);
  bool TryPlace(int qi, const JobRequest& job, Shape& shape);
  std::optional<Plan> PlanPreemption(int qi, const JobRequest& job, Shape& shape, bool reclaim, bool within);
  bool MayPreempt(int qi, const JobRequest& job, const Victim& v, bool reclaim, bool within,
                  const std::map<int, int64_t>& taken) const;
  bool PickOnNode(int qi, const JobRequest& job, size_t n, int64_t missing, bool reclaim, bool within,
                  std::map<int, int64_t>& taken, std::map<size_t, int64_t>& freed,
                  std::vector<size_t>& picked) const;
  void Commit(int qi, const JobRequest& job, const Plan& plan);
  void Wait(const JobRequest& job, std::string message, bool feasible) {
    result_.waiting.push_back({job.job_id, std::move(message), feasible});
  }
  void Block(const JobRequest& job, Shape& shape);
  int32_t CountFits(const JobRequest& job, Shape& shape);
  int64_t Free(size_t n, SlotKind kind) const { return WorkFree(work_[n], kind); }
  bool LessByHost(size_t a, size_t b) const;

  const std::vector<NodeCapacity>& nodes_;
  std::vector<WorkNode> work_;
  std::vector<QueueWork> queues_;
  std::map<std::string, int> queue_index_;
  std::vector<Victim> victims_;
  std::vector<std::vector<size_t>> victims_on_[kKinds];  // per node, rule 8 order
  std::vector<int64_t> coming_[kKinds];                  // per node: slots of leaving jobs
  std::vector<char> reserved_[kKinds];                   // per node (rule 4)
  std::map<ShapeKey, Shape> shapes_;
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> labelled_;  // label -> nodes
  std::string first_blocked_;
  ScheduleResult result_;
};

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

}  // namespace

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
