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
  std::vector<WaitingJob> waiting;   // in queue order
};

// `queue` in any order; `nodes` are the nodes that take new placements
// (READY), with their free capacity. Deterministic.
ScheduleResult Schedule(std::vector<JobRequest> queue, const std::vector<NodeCapacity>& nodes);

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
