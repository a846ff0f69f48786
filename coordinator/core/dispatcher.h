#ifndef RINGMASTER_COORDINATOR_CORE_DISPATCHER_H_
#define RINGMASTER_COORDINATOR_CORE_DISPATCHER_H_

// Dispatcher: the scheduling passes. A pass takes the nodes' free capacity
// (NodeRegistry) and the waiting jobs (JobLifecycle), lets the Scheduler
// decide (scheduler.h: gang, priority, backfill), and for each job placed
// builds its placement (rank_layout.h), reserves its slots and hands it to
// the JobLifecycle to begin the generation; a job that was cancelled in the
// meantime gets its slots back. Jobs left waiting get the scheduler's reason
// as their message.
//
// Elastic jobs (restart.elastic) ask for fewer nodes, down to min_nodes,
// only while fewer schedulable nodes could hold the job at all (lost or
// drained ones), never because some are busy for a moment.
//
// Threading: thread-safe. Passes run one at a time (`pass_mu_`, held for the
// whole pass, its store writes included); only the ticker and tests start
// passes, so no RPC waits for one. A pass holds at most one job's lock at a
// time (JobLifecycle's rules).

#include <functional>
#include <map>
#include <set>
#include <string>
#include <mutex>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/job_lifecycle.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/queue_book.h"

namespace ringmaster::coordinator {

class Dispatcher {
 public:
  // `on_pass`: called after every pass over a non-empty queue with the time
  // it took (injected clock); may be empty.
  Dispatcher(const Clock* clock, NodeRegistry* nodes, JobLifecycle* jobs, QueueBook* queues,
             std::function<void(absl::Duration)> on_pass);

  // One scheduling pass over the QUEUED and RESTARTING jobs: places what the
  // queues' quotas, borrowing limits and fair share allow (ScheduleQueues)
  // and asks the jobs the scheduler picks to be preempted (checkpoint first:
  // JobLifecycle::Preempt) so that a queue gets its quota back.
  void ScheduleNow();

  // What every queue holds now (slots of running jobs and of generations
  // whose ranks are still exiting), and how many jobs run and wait in it.
  struct QueueLoad {
    QueueResources used;
    int32_t running_jobs = 0;
    int32_t waiting_jobs = 0;
  };
  std::map<std::string, QueueLoad> QueueLoads() const;
  // Adds what the queues held since the previous call to their fair-share
  // usage (QueueBook::Advance); every tick.
  void AccountUsage();

 private:
  // Begins one placed job's generation: placement, slots, JobLifecycle.
  absl::Status Place(const JobLifecycle::Waiting& job, const JobPlacement& granted);
  // A program job's MASTER_ADDR and MASTER_PORT (Placement.master_addr,
  // master_port): rank 0's node, and a port no other generation's rank 0
  // holds there.
  absl::Status ChooseMaster(const std::string& job_id, v1::Placement* placement);

  const Clock* clock_;
  NodeRegistry* nodes_;
  JobLifecycle* jobs_;
  QueueBook* queues_;
  const std::function<void(absl::Duration)> on_pass_;
  std::mutex pass_mu_;  // one pass at a time
};

// How many nodes an elastic job asks for now, between min_nodes and
// resources.nodes (see the class comment); resources.nodes otherwise.
int32_t ElasticNodes(const JobLifecycle::Waiting& job, const std::vector<NodeCapacity>& capacity);

// A program generation's MASTER_PORT on rank 0's node: a port in [29500,
// 30000) not in `taken` (the ports other generations' rank 0 hold there),
// the search starting at a point spread by job and generation; 0 when every
// port is taken.
int32_t ChooseMasterPort(const std::string& job_id, int64_t generation, const std::set<int32_t>& taken);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_DISPATCHER_H_
