#ifndef RINGMASTER_COORDINATOR_CORE_JOB_CONTROLLER_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_CONTROLLER_H_

// JobController: builds and owns the coordinator's job managers, each with
// its own lock and threading contract (in its header), split the way Ray's
// GCS splits its managers:
//   JobLifecycle    every job's state machine, timeline, restarts, fencing,
//                   checkpoints, retention; one lock per job; it publishes
//                   into
//   JobViews        what readers see (GetJob, ListJobs, GetRankProgress),
//                   never waiting for a store write
//   Dispatcher      scheduling passes and placements
//   NodeReconciler  registrations, lost nodes, what runs where
// and the QueueBook (the queues in force, their fair-share usage). Every
// state transition is written to the Store with its JobEvent before it is
// applied in memory or announced; if the write fails, nothing changed.
//
// What it is: the ticker (Tick, ScheduleNow) and the few operations that
// span managers: Submit (the queue is resolved before the lifecycle stores
// the job), cordon and drain (NodeRegistry, then JobLifecycle at every
// Tick), the queues (ReplaceQueues, QueueLoads), Recover (the lifecycle,
// then the queues' usage). Everything else (reads, cancel, what workers
// report, checkpoints, registration, retention) is the managers', which
// the gRPC services and tests reach through lifecycle(), views(),
// reconciler() and dispatcher(); the Rendezvous reports to the lifecycle
// directly (Rendezvous::SetListener(&lifecycle())).
//
// Time: Tick() (call it about once a second) expires node leases, restarts
// generations that made no progress for restart.progress_timeout_seconds,
// moves jobs off draining nodes, stops preempted jobs past their grace
// period, adds the queues' usage to their fair share, lets the Rendezvous fail generations past
// their deadline, and schedules.
//
// Threading: thread-safe; the managers' locks, never one for everything.
// JobListener callbacks run with the changed job's lock held, in the order
// that job's changes happened: a listener must not block and must not call
// back into the JobController (queue the work instead).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/checkpoint_registry.h"
#include "coordinator/core/dispatcher.h"
#include "coordinator/core/job_lifecycle.h"
#include "coordinator/core/job_types.h"
#include "coordinator/core/node_reconciler.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/rendezvous.h"
#include "coordinator/store/store.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"
#include "proto/node.pb.h"

namespace ringmaster::coordinator {

class JobController {
 public:
  JobController(const Clock* clock, Store* store, NodeRegistry* nodes, CheckpointRegistry* checkpoints,
                Rendezvous* rendezvous, JobControllerOptions options = {});

  // Before Recover and before any traffic. Not owned; must outlive this.
  void AddListener(JobListener* listener);

  // ---- the managers (what callers use for everything but the above) ----
  JobLifecycle& lifecycle() { return lifecycle_; }
  const JobLifecycle& lifecycle() const { return lifecycle_; }
  const JobViews& views() const { return lifecycle_.views(); }
  NodeReconciler& reconciler() { return reconciler_; }
  const NodeReconciler& reconciler() const { return reconciler_; }
  Dispatcher& dispatcher() { return dispatcher_; }

  // Loads every job from the store (after NodeRegistry::Recover and
  // CheckpointRegistry::Recover). QUEUED jobs keep their queue position;
  // RUNNING jobs continue (their slots reserved again, a RECOVERED event);
  // PLACED/STARTING jobs, whose rendezvous state was lost, restart their
  // generation; terminal jobs stay as they are. The queues' fair-share usage
  // is seeded from the store's placements.
  absl::Status Recover();

  // ---- JobService ----

  // Applies defaults, validates (INVALID_ARGUMENT naming the field), stores
  // the job and its SUBMITTED event durably, queues it. A request_id already
  // used returns that job. validate_only: stores nothing; the job has no id.
  // spec.queue is resolved first (QueueConfig::ResolveQueue: INVALID_ARGUMENT
  // for an unknown queue, PERMISSION_DENIED for a user not its member; empty:
  // the user's default) and the job records the queue chosen.
  // The job's `unschedulable` says why when no node registered now could
  // ever run it (it is queued all the same).
  absl::StatusOr<v1::Job> Submit(v1::JobSpec spec, const SubmitOptions& options);

  // ---- cordon and drain (JobService, and a worker draining itself) ----

  // Cordons the node `node` names (an id or a hostname) on behalf of `by`,
  // or, with `by` empty, uncordons it (a drain in progress ends; jobs
  // already moved stay where they are). NOT_FOUND; INVALID_ARGUMENT for a
  // hostname several nodes share.
  absl::StatusOr<v1::NodeInfo> CordonNode(const std::string& node, const std::string& by, const std::string& reason);
  // Cordons the node and moves every job placed there
  // (JobLifecycle::DrainNode), now and at every Tick, until no rank runs
  // there; then the node's `draining` ends (it stays cordoned).
  absl::StatusOr<DrainResult> DrainNode(const std::string& node, const std::string& by, const std::string& reason);

  // ---- queues (docs/operations.md) ----

  // The queues in force and their fair-share usage.
  const QueueBook& queues() const { return queues_; }
  // A new queues file (SIGHUP): in force from the next Submit and pass.
  void ReplaceQueues(QueueConfig config);
  // What each queue holds and how many of its jobs run and wait.
  std::map<std::string, Dispatcher::QueueLoad> QueueLoads() const { return dispatcher_.QueueLoads(); }

  // ---- time ----

  // Lost nodes, progress timeouts, drains, rendezvous deadlines, then
  // ScheduleNow.
  void Tick();
  // One scheduling pass over QUEUED and RESTARTING jobs.
  void ScheduleNow();

 private:
  // One round of every drain in progress; ends those with nothing left.
  void ContinueDrains();

  Store* const store_;
  NodeRegistry* const nodes_;
  Rendezvous* const rendezvous_;
  QueueBook queues_;
  JobLifecycle lifecycle_;
  NodeReconciler reconciler_;
  Dispatcher dispatcher_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_CONTROLLER_H_
