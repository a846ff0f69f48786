#ifndef RINGMASTER_COORDINATOR_CORE_JOB_CONTROLLER_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_CONTROLLER_H_

// JobController: builds and owns the coordinator's job managers, each with
// its own lock and threading contract (in its header), split the way Ray's
// GCS splits its managers:
//   JobLifecycle    every job's state machine, timeline, restarts, fencing;
//                   one lock per job; it publishes into
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
// then the queues' usage). Callers reach the managers through lifecycle(),
// views(), reconciler() and dispatcher() for everything else.
//
// The one-line forwarders below (GetJob ... ReportDamagedCheckpoint,
// ExpireFinishedJobs, the RendezvousListener) remain only because the gRPC
// services (coordinator/service/*) and the composition root still call them;
// they go once those callers move to the managers (coordinator/DESIGN.md).
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

class JobController : public RendezvousListener {
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
  // NOT_FOUND for an unknown id.
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id) const;
  // One page of the job's timeline (Store::LoadEventPage): GetJob's. NOT_FOUND.
  absl::StatusOr<EventPage> GetEventPage(const std::string& job_id, const EventPageQuery& query) const;
  // WatchJob's start: calls `at_snapshot` with the job and the newest page
  // of its events after `after_sequence` (at most kMaxWatchEvents and 1 MiB;
  // EventPage.more when older ones were left out), both read at one moment
  // under the job's lock, so that a JobListener subscription made inside
  // `at_snapshot` receives exactly the changes that follow it. `at_snapshot`
  // runs under that lock: the JobListener rules apply (record, never call
  // back). NOT_FOUND.
  absl::Status SnapshotJob(const std::string& job_id, int64_t after_sequence,
                           const std::function<void(const v1::Job&, const EventPage&)>& at_snapshot) const;
  // Summaries, newest first, at most page_size and kMaxListJobsPageBytes.
  // INVALID_ARGUMENT for a page_size outside [0, 1000] or a foreign token.
  absl::StatusOr<ListJobsPage> ListJobs(const ListJobsQuery& query) const;
  // Any non-terminal state -> CANCELLED, stopping the current generation's
  // ranks; a terminal job is returned unchanged. NOT_FOUND.
  absl::StatusOr<CancelResult> Cancel(const std::string& job_id, const std::string& reason);
  absl::StatusOr<std::vector<v1::CheckpointInfo>> ListCheckpoints(const std::string& job_id,
                                                                  bool include_incomplete) const;

  // ---- NodeService ----

  // Registers the node and reconciles what the worker says is running:
  // ranks of generations that are over get stop orders (and keep their
  // slots until their exits are reported); ranks of a RUNNING generation
  // placed on this node that are no longer running fail that generation.
  // `worker_drains`: the worker drains its node (NodeRegistry::Register);
  // the jobs move at the next Tick. `proof`: what the worker's call
  // presented (NodeRegistry::Register; null: a trusted caller).
  absl::StatusOr<NodeRegistrationResult> RegisterNode(const v1::NodeInfo& node,
                                                      const std::vector<RunningRank>& running,
                                                      bool worker_drains = false, const NodeProof* proof = nullptr);
  // OK when the ranks (none: some rank) of that generation of the job were
  // placed on `node_id`; PERMISSION_DENIED otherwise, NOT_FOUND for an
  // unknown job (JobLifecycle::CheckPlacedOn). What a node reports, commits, pushes or asks the
  // rendezvous for is checked with it first.
  absl::Status CheckPlacedOn(const std::string& node_id, const std::string& job_id, int64_t generation,
                             const std::vector<int32_t>& ranks) const;
  // OK when some rank of the job's current generation was placed on
  // `node_id` (JobLifecycle::CheckHostsJob): what a node may read of a job.
  absl::Status CheckHostsJob(const std::string& node_id, const std::string& job_id) const;
  // What should run on a node now: a start order per current generation
  // placed there (sent when a worker's session opens; workers treat a start
  // order for ranks already running as done). `at_snapshot` is called with
  // the orders while every job's lock is held (listener rules apply), so
  // that a session attached inside it receives every later order after
  // these: a stop order of a generation can never be overtaken by that
  // generation's start order, and no start order is lost between the
  // snapshot and the attach.
  void AssignmentsForNode(const std::string& node_id,
                          const std::function<void(const std::vector<StartOrder>&)>& at_snapshot) const;
  // Releases the rank's slot; for the current generation: all ranks exited 0
  // -> SUCCEEDED; a failure -> RESTARTING (new generation, from the latest
  // checkpoint) or, with no restarts left, FAILED. An exit with
  // kExitUnrecoverable (common/exit_codes.h: the rank's spec or a request it
  // made was refused) -> FAILED at once, restarts unused. Reports for a
  // generation that is over are acknowledged and ignored. OK for unknown jobs.
  absl::Status ReportRankExit(const RankExit& exit);
  // A worker could not start the ranks of a generation: the slots of the
  // ranks that never started are released; the current generation fails
  // (restarting, or FAILED at once when unrecoverable). OK for unknown jobs.
  absl::Status ReportStartFailure(const StartFailure& failure);
  // Records a rank's step metrics (rank 0's are the job's progress); the
  // first report of a STARTING generation makes it RUNNING. Returns true
  // when the generation is over (the rank should stop). NOT_FOUND.
  absl::StatusOr<bool> ReportProgress(const std::string& job_id, int64_t generation, int32_t global_rank,
                                      const v1::StepMetrics& metrics);

  // ---- CheckpointService ----

  // FAILED_PRECONDITION for a generation that is not the job's current,
  // active one ("generation 2 of job j-3 is over; current is 3");
  // INVALID_ARGUMENT for pipeline_stages other than the job's; otherwise as
  // CheckpointRegistry::Commit, with the job's keep and a
  // CHECKPOINT_COMMITTED event when the checkpoint completes.
  absl::StatusOr<CommitResult> CommitCheckpoint(const ShardCommit& commit);
  // NOT_FOUND for an unknown job or one without a complete checkpoint.
  absl::StatusOr<v1::CheckpointInfo> LatestCheckpoint(const std::string& job_id) const;
  // Fenced as CommitCheckpoint. Marks the checkpoint damaged (a
  // CHECKPOINT_DAMAGED event, once) and, when the current generation resumed
  // from it, restarts the generation from the newest good checkpoint; that
  // restart does not count against max_restarts. NOT_FOUND for an unknown
  // checkpoint.
  absl::Status ReportDamagedCheckpoint(const DamagedCheckpoint& report);

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

  // ---- retention ----

  // Deletes finished jobs past `retention` (JobLifecycle::ExpireFinished);
  // returns their ids, whose logs the caller removes.
  absl::StatusOr<std::vector<std::string>> ExpireFinishedJobs(absl::Time now, const JobRetention& retention);

  // ---- time ----

  // Lost nodes, progress timeouts, drains, rendezvous deadlines, then
  // ScheduleNow.
  void Tick();
  // One scheduling pass over QUEUED and RESTARTING jobs.
  void ScheduleNow();

  // ---- RendezvousListener ----
  void OnRendezvousComplete(const std::string& job_id, int64_t generation) override;
  void OnRendezvousFailed(const std::string& job_id, int64_t generation, const std::string& reason) override;

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
