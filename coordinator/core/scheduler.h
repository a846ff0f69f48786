#ifndef RINGMASTER_COORDINATOR_SCHEDULER_H_
#define RINGMASTER_COORDINATOR_SCHEDULER_H_

// Scheduler: a pure function from (queue of pending jobs, free capacity per
// node) to placements. It owns nothing and keeps no state; thread-safe.
//
// The rules (coordinator/DESIGN.md has the reasoning):
//
// 1. Order. Jobs are considered by priority (higher first), then submit order
//    (FIFO within a priority).
// 2. Gang. A job of N nodes x R ranks per node is placed on N distinct nodes,
//    each with R free slots of its kind, or not at all. Ranks are contiguous
//    per node (see rank_layout.h).
// 3. Eligibility. A node is *eligible* for a job when it carries every label
//    of resources.node_selector and its TOTAL slots of the job's kind could
//    hold R ranks (ignoring what runs there now). A job is *feasible* when at
//    least N nodes are eligible: it could start on this cluster if it were
//    empty. An infeasible job waits, with a message saying why, and does not
//    hold anything back.
// 4. Conservative, estimate-free backfill. Considering jobs in order, a
//    feasible job that cannot be placed now is *blocked*, and reserves every
//    (eligible node, slot kind) pair it could use. A later job may start only
//    on nodes whose slots of its kind no blocked job ahead of it could use.
//    So a backfilled job never takes a slot that an earlier blocked job could
//    ever use: whenever enough capacity frees up for the earlier job, the
//    backfilled job is not in its way. It never delays the head of the queue
//    (nor any job ahead of it), without needing run-time estimates. The price:
//    on a homogeneous cluster nothing passes a blocked head; backfill happens
//    across node selectors, slot kinds (CPU jobs beside GPU jobs) and nodes
//    too small for the head.
// 5. Node choice. Among the nodes a job may use, best fit: the nodes with the
//    fewest free slots of its kind that still hold R ranks (keeping large
//    holes for large jobs), ties by hostname then node id. The chosen nodes
//    are ordered by hostname then node id: that order is node_rank.
//    CUDA ranks get the node's free GPUs with the lowest indices.
//
// With queues (ScheduleQueues; Schedule is the case of one unlimited queue):
//
// 6. Quota. A queue's usage of a kind (GPUs, CPU slots: counted apart) is
//    what its running jobs hold, less those already `preempting`, plus what
//    this pass placed. A job may be placed only if usage + its demand stays
//    within nominal + borrowing limit; within nominal it is *guaranteed*,
//    beyond it *borrows*. A job over the limit waits, reserves no node, and
//    holds back its queue's later jobs of the same kind (they would spend
//    the quota it waits for).
// 7. Order across queues. The next job considered is the head of some queue
//    (rule 1 within a queue): guaranteed heads before borrowing ones, then
//    the lowest decayed_usage / weight, then queue name. Rules 2-5 apply to
//    that sequence: a blocked job reserves against every later job, of any
//    queue.
// 8. Reclaim. A guaranteed job blocked for capacity may preempt running jobs
//    of its kind from other queues that borrow (above their nominal quota
//    when the victim is picked; a victim is a whole gang, so the last one may
//    take its queue below it): lowest priority first, then youngest, on the
//    fewest nodes that make its gang fit, and none at all when even every
//    such victim could not. With preempt_within, a blocked job may also
//    preempt lower-priority jobs of its own queue. Slots of `preempting`
//    jobs count as coming free. A job waiting for its victims reserves the
//    nodes it will use (only those).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/core/capacity.h"

namespace ringmaster::coordinator {

// One pending job, as the scheduler sees it.
struct JobRequest {
  std::string job_id;
  int32_t priority = 0;     // higher first
  int64_t submit_seq = 0;   // FIFO within a priority
  int32_t nodes = 1;        // N
  int32_t ranks_per_node = 1;  // R
  SlotKind kind = SlotKind::kGpu;
  int32_t cpus_per_rank = 1;  // CPU slots per rank (kCpu only)
  std::map<std::string, std::string> node_selector;
  // Never placed on these nodes (ids): in a cool-down after failing the job.
  std::set<std::string> excluded_nodes;
  // Its queue (ScheduleQueues only; Schedule ignores it).
  std::string queue;
};

// One queue, as the scheduler sees it. Quotas are in slots of each kind.
struct QueueState {
  std::string name;
  int64_t nominal_gpus = 0, nominal_cpus = 0;  // may always run up to this
  int64_t borrow_gpus = 0, borrow_cpus = 0;    // at most this much beyond nominal
  double weight = 1;                           // fair-share weight (> 0)
  double decayed_usage = 0;                    // slot-seconds, decayed by the caller
  // A higher-priority job of this queue may preempt a lower one of it.
  bool preempt_within = false;
};

// A job that holds slots now.
struct RunningJob {
  std::string job_id;
  std::string queue;
  int32_t priority = 0;
  int64_t start_seq = 0;  // larger = younger
  SlotKind kind = SlotKind::kGpu;
  std::vector<NodeGrant> nodes;  // what it holds, per node
  // Already asked to leave: its slots count as coming free, and it is
  // neither counted in its queue's usage nor picked again.
  bool preempting = false;
};

// Ask `job_id` to leave (checkpoint, stop, requeue) so that `for_job` can start.
struct Preemption {
  std::string job_id;
  std::string for_job;
  std::string reason;  // for the timeline: who and why
};

struct JobPlacement {
  std::string job_id;
  std::vector<NodeGrant> nodes;  // node_rank order; N entries
  // Placed while a job ahead of it was blocked (rule 4).
  bool backfilled = false;
};

struct WaitingJob {
  std::string job_id;
  // Human-readable, for Job.message: "waiting for 2 nodes with 8 free GPUs
  // each; 1 such node now".
  std::string message;
  // false: infeasible on this cluster (rule 3); it reserves nothing.
  bool feasible = true;
};

struct ScheduleResult {
  std::vector<JobPlacement> placed;  // in the order they were decided
  std::vector<WaitingJob> waiting;   // in the order considered
  std::vector<Preemption> preempt;   // ScheduleQueues only
};

// `queue` in any order; `nodes` are the nodes that take new placements
// (READY), with their free capacity. Deterministic.
ScheduleResult Schedule(std::vector<JobRequest> queue, const std::vector<NodeCapacity>& nodes);

// Rules 1-8. `pending` in any order, each naming one of `queues` (a job of an
// unknown queue waits, infeasible); `running` are the jobs holding slots now
// (`nodes`' free slots already exclude them). Deterministic.
ScheduleResult ScheduleQueues(std::vector<JobRequest> pending, const std::vector<RunningJob>& running,
                              const std::vector<QueueState>& queues, const std::vector<NodeCapacity>& nodes);

// Slots of `kind` a job needs on each of its nodes (R, or R x cpus_per_rank).
int32_t SlotsPerNode(const JobRequest& job);
// Rule 3: may `node` ever hold R ranks of `job`?
bool Eligible(const JobRequest& job, const NodeCapacity& node);
// Why no set of `nodes` could ever run `job` (rule 3: fewer than N eligible
// nodes), for the user; nullopt when the job is feasible.
std::optional<std::string> Unschedulable(const JobRequest& job, const std::vector<NodeCapacity>& nodes);
// Free slots of `kind` on `node` now.
int32_t FreeSlots(const NodeCapacity& node, SlotKind kind);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_SCHEDULER_H_
