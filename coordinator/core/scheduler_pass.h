#ifndef RINGMASTER_COORDINATOR_CORE_SCHEDULER_PASS_H_
#define RINGMASTER_COORDINATOR_CORE_SCHEDULER_PASS_H_

// The scheduler's working state for one pass (rules 1-8 of scheduler.h),
// shared by scheduler.cc (ordering, placing, blocking) and
// scheduler_reclaim.cc (choosing victims). Internal to the scheduler.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/scheduler.h"

namespace ringmaster::coordinator::scheduler_internal {

// The scheduler's working copy of one node.
struct WorkNode {
  const NodeCapacity* node;
  std::vector<std::string> free_gpus;  // by index
  int32_t free_cpu;
};

inline std::string SlotWords(const JobRequest& job) {
  if (job.kind == SlotKind::kGpu) {
    return absl::StrCat(job.ranks_per_node, job.ranks_per_node == 1 ? " free GPU" : " free GPUs");
  }
  return absl::StrCat(SlotsPerNode(job), " free CPU slots");
}

inline std::string SelectorWords(const JobRequest& job) {
  if (job.node_selector.empty()) return "";
  std::vector<std::string> parts;
  for (const auto& [k, v] : job.node_selector) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrCat(" labelled ", absl::StrJoin(parts, ","));
}

inline std::string NodesWords(int n) { return absl::StrCat(n, n == 1 ? " node" : " nodes"); }

inline bool Before(const JobRequest& a, const JobRequest& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.submit_seq != b.submit_seq) return a.submit_seq < b.submit_seq;
  return a.job_id < b.job_id;
}

inline int32_t WorkFree(const WorkNode& w, SlotKind kind) {
  return kind == SlotKind::kGpu ? static_cast<int32_t>(w.free_gpus.size()) : w.free_cpu;
}

inline constexpr int64_t kUnlimited = int64_t{1} << 50;
inline constexpr int kKinds = 2;

inline int KindIndex(SlotKind kind) { return kind == SlotKind::kGpu ? 0 : 1; }
inline std::string UnitWords(SlotKind kind) { return kind == SlotKind::kGpu ? "GPUs" : "CPU slots"; }
inline int64_t Demand(const JobRequest& job) { return int64_t{job.nodes} * SlotsPerNode(job); }
inline int64_t Nominal(const QueueState& q, SlotKind kind) {
  return kind == SlotKind::kGpu ? q.nominal_gpus : q.nominal_cpus;
}
inline int64_t Limit(const QueueState& q, SlotKind kind) {
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

inline bool VictimBefore(const Victim& a, const Victim& b) {
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

}  // namespace ringmaster::coordinator::scheduler_internal

#endif  // RINGMASTER_COORDINATOR_CORE_SCHEDULER_PASS_H_
