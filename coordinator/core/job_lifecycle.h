#ifndef RINGMASTER_COORDINATOR_CORE_JOB_LIFECYCLE_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_LIFECYCLE_H_

// JobLifecycle: the owner of every job's state machine, timeline and
// restarts. QUEUED -> PLACED -> STARTING -> RUNNING -> (RESTARTING ->
// STARTING -> RUNNING)* -> SUCCEEDED | FAILED | CANCELLED (job_state_machine.h
// has the table). Every transition is written to the Store with its JobEvent
// (and, when a generation begins, its placement) in one transaction BEFORE it
// is applied in memory or announced; if the write fails, nothing changed.
//
// It decides what happens to a job; it does not choose nodes (the
// Dispatcher does, and hands it a placement: BeginGeneration) and does not
// talk to workers' registrations (the NodeReconciler does, and hands it what
// it found: FailGeneration, ReconcileVanished).
//
// Threading. Thread-safe, with three kinds of lock:
//  * each job has its own mutex, held for the whole of a transition of that
//    job, its store write included, so that a job's transitions and its
//    announcements (JobListener) happen one at a time and in order. Only
//    calls about the same job wait for it.
//  * `table_mu_` guards the map of jobs; it is held only to copy in memory,
//    never during I/O or a callback.
//  * readers (GetJob, ListJobs, GetRankProgress) read the views this
//    publishes (JobViews, its own leaf lock) and never wait for a store write.
// Lock order: job mutexes (several only in job-id order: AssignmentsForNode)
// -> {NodeRegistry, CheckpointRegistry, Rendezvous, listeners} -> Store;
// table_mu_ and the views' lock are leaves. JobListener callbacks run with
// the job's mutex held: they must only enqueue, never call back. The
// Rendezvous calls OnRendezvous* without its own lock held (see rendezvous.h).
//
// What it leaves to others: the read views and their paging (JobViews),
// what a submission must pass before it is stored (job_admission.h, pure),
// which finished jobs retention deletes (job_retention.h, pure).

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
#include "coordinator/core/job_types.h"
#include "coordinator/core/job_views.h"
#include "coordinator/core/node_quarantine.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/node_strikes.h"
#include "coordinator/core/rendezvous.h"
#include "coordinator/core/scheduler.h"
#include "coordinator/core/straggler_detector.h"
#include "coordinator/store/store.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::coordinator {

class JobLifecycle : public RendezvousListener {
 public:
  JobLifecycle(const Clock* clock, Store* store, NodeRegistry* nodes, CheckpointRegistry* checkpoints,
               Rendezvous* rendezvous, const JobControllerOptions& options);

  // Before Recover and before any traffic. Not owned; must outlive this.
  void AddListener(JobListener* listener);
  // Loads every job from the store (after NodeRegistry::Recover and
  // CheckpointRegistry::Recover), before any traffic. QUEUED jobs keep their
  // queue position; RUNNING jobs continue (their slots reserved again, a
  // RECOVERED event); PLACED/STARTING jobs, whose rendezvous state was lost,
  // restart their generation; terminal jobs stay as they are.
  absl::Status Recover();

  // What readers see of every job (GetJob, ListJobs, GetRankProgress).
  const JobViews& views() const { return views_; }

  // ---- JobService (JobController documents each) ----
  // Checks the submission (job_admission.h) before it stores anything.
  absl::StatusOr<v1::Job> Submit(v1::JobSpec spec, const SubmitOptions& options);
  absl::StatusOr<std::vector<v1::JobEvent>> GetEvents(const std::string& job_id, int64_t after_sequence) const;
  absl::StatusOr<EventPage> GetEventPage(const std::string& job_id, const EventPageQuery& query) const;
  absl::Status SnapshotJob(const std::string& job_id, int64_t after_sequence,
                           const std::function<void(const v1::Job&, const EventPage&)>& at_snapshot) const;
  absl::StatusOr<CancelResult> Cancel(const std::string& job_id, const std::string& reason);
  absl::StatusOr<std::vector<v1::CheckpointInfo>> ListCheckpoints(const std::string& job_id,
                                                                  bool include_incomplete) const;

  // ---- what ranks report (NodeService, CheckpointService) ----
  absl::Status ReportRankExit(const RankExit& exit);
  absl::Status ReportStartFailure(const StartFailure& failure);
  absl::StatusOr<bool> ReportProgress(const std::string& job_id, int64_t generation, int32_t global_rank,
                                      const v1::StepMetrics& metrics);
  absl::StatusOr<CommitResult> CommitCheckpoint(const ShardCommit& commit);
  absl::StatusOr<v1::CheckpointInfo> LatestCheckpoint(const std::string& job_id) const;
  absl::Status ReportDamagedCheckpoint(const DamagedCheckpoint& report);

  // ---- for the Dispatcher ----

  // A job waiting for nodes (QUEUED or RESTARTING), as the scheduler sees it.
  struct Waiting {
    JobRequest request;       // excluded_nodes: the nodes in its cool-down, unless it needs them
    v1::ResourceSpec resources;
    int32_t pipeline = 1;     // parallelism.pipeline
    int32_t min_nodes = 0;    // restart.elastic.min_nodes; 0: not elastic
    int64_t generation = 0;   // its current (last) generation
    bool program = false;     // a program job (JobSpec.program): it gets a MASTER_PORT
  };
  // Every waiting job, against the capacity the pass works with.
  std::vector<Waiting> WaitingJobs(const std::vector<NodeCapacity>& capacity) const;
  // Whether any job is QUEUED or RESTARTING: a pass without one need not
  // read every node's capacity (a pass runs after every registration).
  bool HasWaitingJobs() const;
  // The queue of every waiting job (one entry per job).
  std::vector<std::string> WaitingQueues() const;
  // Starts generation `placement.generation()` (= `after_generation` + 1):
  // QUEUED -> PLACED or RESTARTING -> STARTING with the placement, then the
  // start orders and, from PLACED, STARTING. `where` describes the nodes for
  // the job's message. FAILED_PRECONDITION when the job is no longer waiting
  // at `after_generation` (cancelled meanwhile): the caller releases the
  // slots it reserved.
  absl::Status BeginGeneration(const std::string& job_id, int64_t after_generation, const v1::Placement& placement,
                               const std::string& where);
  // A waiting job's message and unschedulable reason after a pass (in memory;
  // stored with its next transition). Announced only when they change.
  void SetWaitingMessage(const std::string& job_id, const std::string& message, const std::string& unschedulable);

  // ---- for the NodeReconciler ----

  // The slots of a rank process of generation `generation` of a job, as its
  // placement assigned them (the GPU, or the CPU slots); nullopt for an
  // unknown job, generation or rank. Reads an older generation's placement
  // from the store, with no lock held.
  std::optional<RankSlot> SlotOf(const std::string& job_id, int64_t generation, int32_t global_rank) const;
  // True when the rank belongs to the job's current, active generation and
  // is placed on `node_id`.
  bool RunsCurrently(const std::string& job_id, int64_t generation, int32_t global_rank,
                     const std::string& node_id) const;
  // OK when every rank of `ranks` of generation `generation` of the job was
  // placed on `node_id` (`ranks` empty: when some rank was): a node acts only
  // for its own ranks. PERMISSION_DENIED otherwise, an unknown generation
  // included; NOT_FOUND for an unknown job (nothing of it is anywhere); a
  // store error reading an older generation's placement (no lock held) as it is.
  absl::Status CheckPlacedOn(const std::string& node_id, const std::string& job_id, int64_t generation,
                             const std::vector<int32_t>& ranks) const;
  // OK when some rank of the job's current generation was placed on
  // `node_id`: what a node may read of a job (GetLatestCheckpoint).
  // PERMISSION_DENIED otherwise (a job not placed yet included); NOT_FOUND
  // for an unknown job.
  absl::Status CheckHostsJob(const std::string& node_id, const std::string& job_id) const;
  // Slots `node_id` holds for ranks its worker no longer runs: a slot of a
  // RUNNING current generation is released and fails that generation; one
  // of a generation still starting stays (its start order is sent again);
  // any other is released.
  void ReconcileVanished(const std::string& node_id, const std::string& hostname,
                         const std::vector<RankSlot>& vanished);
  // Fails the current generation of every active job placed on the lost
  // node (no stop order goes there). False if some failure could not be
  // stored (call again).
  bool FailJobsOnLostNode(const std::string& node_id, const std::string& why);
  // The start orders of every current generation placed on `node_id`, with
  // `at_snapshot` called while every job's mutex is held (listener rules
  // apply), so a session attached inside it receives every later order
  // after these. Waits for the transitions in flight; for session opens.
  void AssignmentsForNode(const std::string& node_id,
                          const std::function<void(const std::vector<StartOrder>&)>& at_snapshot) const;

  // ---- drains ----
  // Moves every job whose current generation is placed on `node_id`, a node
  // being drained (`hostname` for messages); called again at every tick
  // until none is left:
  //  * RUNNING: its ranks are asked for a checkpoint now (a DRAIN_REQUESTED
  //    event; CheckpointNow orders to each of its nodes, sent again every
  //    30 s while it waits). The next checkpoint that completes moves it
  //    (CommitCheckpoint); so does drain_checkpoint_timeout without one,
  //    from its newest checkpoint;
  //  * PLACED or STARTING: moved at once (it has trained nothing new).
  // Moved: the generation stops (NODE_DRAINED, no state dump) and the job
  // waits for nodes again, the restart not counted against max_restarts.
  // Returns the ids of the jobs still placed on the node.
  std::vector<std::string> DrainNode(const std::string& node_id, const std::string& hostname);
  // An operator uncordoned the node: the failures so far no longer count
  // towards its quarantine (options.quarantine, NodeQuarantine).
  void ForgetQuarantine(const std::string& node_id) { quarantine_.Forget(node_id); }

  // ---- stragglers (job_lifecycle_stragglers.cc) ----
  // Every rank report feeds the job's StragglerDetector (options.stragglers);
  // a flagged rank gets a STRAGGLER event, a recovered one
  // STRAGGLER_RECOVERED. A job with restart.move_stragglers is then moved off
  // the rank's node like a drain (checkpoint first, NODE_DRAINED, not counted
  // against max_restarts), the node not cordoned: only that job keeps off it,
  // for options.stragglers.move_window; at most one such move per window,
  // and none when no other node could take the job (the event says why).
  // The re-sent orders and the patience of pending moves; every tick.
  void ContinueStragglerMoves();

  // ---- preemption (a queue reclaims its quota; job_lifecycle_preempt.cc) ----
  // Asks a job to give its slots back, checkpoint first (`reason`: who
  // preempts it and why, for its timeline):
  //  * RUNNING: its ranks are asked for a checkpoint now (a
  //    PREEMPTION_REQUESTED event; CheckpointNow orders, sent again every
  //    30 s). The next checkpoint that completes stops the generation;
  //    without one within options.preemption_grace it is stopped all the
  //    same and resumes from its newest committed checkpoint;
  //  * PLACED or STARTING: stopped at once (it has trained nothing new).
  // Stopped: PREEMPTED, no state dump; the job waits in its queue again, not
  // counted against max_restarts. Asking again while one is pending, or for
  // a job that holds no generation, changes nothing. NOT_FOUND.
  absl::Status Preempt(const std::string& job_id, const std::string& reason);
  // The grace periods and re-sent orders of pending preemptions; every tick.
  void ContinuePreemptions();
  // What the scheduler needs of the jobs holding `held` slots (grouped by
  // job and generation): their queue and order, and whether the slots are
  // coming free anyway (a generation that is over, or a pending preemption).
  std::vector<RunningJob> RunningJobs(const std::vector<HeldGeneration>& held) const;

  // ---- retention ----
  // Deletes the finished jobs that ended more than retention.max_age before
  // `now`, or are beyond the newest retention.max_count finished ones
  // (SelectExpired): from the store (one transaction), the checkpoint
  // registry and memory. Returns their ids (the caller removes their logs).
  // Nothing changes on a store error.
  absl::StatusOr<std::vector<std::string>> ExpireFinished(absl::Time now, const JobRetention& retention);

  // ---- time ----
  // Fails RUNNING generations without step progress for
  // restart.progress_timeout_seconds.
  void CheckProgress();

  // ---- RendezvousListener ----
  void OnRendezvousComplete(const std::string& job_id, int64_t generation) override;
  void OnRendezvousFailed(const std::string& job_id, int64_t generation, const std::string& reason) override;

 private:
  // One job. `mu` guards everything below it.
  struct Entry {
    mutable std::mutex mu;
    JobRecord record;  // as stored; record.job.placement = current generation's
    // In memory only (re-reported after a coordinator restart):
    std::map<int32_t, v1::StepMetrics> progress;  // current generation, by rank
    std::set<int32_t> exited_ok;                   // current generation
    absl::Time last_progress;                      // RUNNING: last step report
    absl::Time rendezvous_deadline;
    NodeStrikes strikes;  // nodes the job failed on (cool-downs)
    // What the current generation's ranks resume from, chosen once when it
    // is dispatched, so that every node's start order names the same
    // checkpoint (nullopt: from scratch). Not chosen after a coordinator
    // restart: the orders then name the latest checkpoint.
    bool resume_chosen = false;
    std::optional<v1::CheckpointInfo> resume_from;
    // A drain asked the current generation for a checkpoint; the next one
    // that completes (saved_step) moves the job off `node_id`.
    struct DrainWait {
      std::string node_id;
      std::string hostname;
      absl::Time requested;
      absl::Time sent;           // CheckpointNow orders last sent
      int64_t saved_step = -1;   // >= 0: the checkpoint came; move it
      bool straggler = false;    // not a drain: moving off a straggler's node
    };
    std::optional<DrainWait> drain;
    // The current generation's stragglers, and the node the job last moved
    // off for one, which it keeps off until straggler_avoid_until.
    StragglerDetector stragglers;
    std::string straggler_node;
    absl::Time straggler_avoid_until = absl::InfinitePast();
    // A preemption asked the current generation for a checkpoint.
    struct PreemptWait {
      std::string reason;        // who preempts it and why
      absl::Time requested;
      absl::Time sent;           // CheckpointNow orders last sent
      int64_t saved_step = -1;   // >= 0: the checkpoint came
    };
    std::optional<PreemptWait> preempt;
    // Where the job's time went, as of its newest event (goodput.h): every
    // announced event is applied; rebuilt from the stored timeline by Recover.
    v1::GoodputBreakdown goodput;
    // checkpoint.interval auto: the current generation's inputs (chosen at
    // dispatch), and the interval in force with why (Job.checkpoint_interval;
    // from the dispatch, then from every commit's stall).
    v1::AutoIntervalInputs auto_interval;
    v1::CheckpointInterval checkpoint_interval;
    // Every rank of the current generation reported a step (STEPPING
    // announced), and when the failure that stopped the previous one was
    // detected (InfinitePast: none; the restart latency counts from it).
    bool stepping = false;
    absl::Time failure_detected = absl::InfinitePast();
  };
  // One failure of a job's current generation.
  // Whether the current generation's ranks talk to the coordinator about
  // their progress: always the built-in trainer's; a program's once it
  // reported a step (the SDK's report()). Only then do the progress timeout
  // apply and a drain or a preemption ask for a checkpoint first.
  bool ReportsProgressLocked(const Entry& entry) const;
  // At dispatch: the auto interval's inputs for the generation (its failures,
  // its nodes' over the window, the bounds) and the interval in force
  // (job_lifecycle_interval.cc).
  void ChooseCheckpointIntervalLocked(Entry& entry);
  // Announces STEPPING once every rank of the RUNNING generation reported a
  // step (job_lifecycle_interval.cc).
  void AnnounceSteppingIfDueLocked(Entry& entry);
  struct GenerationFailure {
    v1::JobEventKind kind = v1::JOB_EVENT_KIND_RANK_EXITED;
    std::string reason;
    int32_t rank = -1;
    std::string node_id;    // the node it happened on (node strikes), if known
    std::string lost_node;  // a lost node: no stop order is sent there
    bool unrecoverable = false;  // no restart can fix it: FAILED at once
    bool dump_state = true;      // the ranks dump their state before they stop
    // Counts towards the node's quarantine: false when the node is not to
    // blame as a sign of sickness (its worker stopped the rank, e.g. on
    // shutdown, or refused or failed to start it).
    bool quarantine_count = true;
  };

  std::shared_ptr<Entry> Find(const std::string& job_id) const;
  std::vector<std::shared_ptr<Entry>> AllEntries() const;

  // The rest run with entry.mu held.
  v1::Job SnapshotLocked(const Entry& entry) const;
  // Applies `events` to the entry's goodput account, publishes the entry to
  // views_ (whose per-rank progress ReportProgress and DispatchLocked keep),
  // then tells the listeners.
  void NotifyJobLocked(Entry& entry, const std::vector<v1::JobEvent>& events);
  void NotifyStopLocked(const std::vector<StopOrder>& orders);
  v1::JobEvent MakeEvent(const Entry& entry, v1::JobEventKind kind, v1::JobState to, const std::string& reason,
                         int32_t rank = -1, const std::string& node_id = "") const;
  // Writes `next` with `events` (and `placement`) in one transaction, then
  // applies it to `entry`, publishes and notifies. Every event's transition
  // must be legal.
  absl::Status CommitLocked(Entry& entry, JobRecord next, std::vector<v1::JobEvent> events,
                            const v1::Placement* placement = nullptr);
  // <root>/<job id>/gen-<generation> of the job's current generation
  // (common/checkpoint_layout.h): the one directory its commits may name.
  std::string CheckpointDir(const v1::Job& job) const;
  std::set<std::string> ExcludedNodesLocked(const Entry& entry, const std::vector<NodeCapacity>& capacity) const;
  void DispatchLocked(Entry& entry);
  absl::Status MarkRunningLocked(Entry& entry, const std::string& why);
  // A failure of the current generation: RESTARTING, or FAILED when it is
  // unrecoverable or no restarts are left (RestartCounts says which restarts
  // use them up). Stops the generation's ranks (except on the lost node).
  absl::Status FailGenerationLocked(Entry& entry, const GenerationFailure& failure);
  // Moves a job off the drained node: its generation stops (NODE_DRAINED).
  absl::Status MoveOffDrainedLocked(Entry& entry, const std::string& node_id, const std::string& hostname,
                                    const std::string& why);
  // A rank's report, to the job's StragglerDetector; a change is recorded
  // (and, with consent, the move begun).
  void CheckStragglerLocked(Entry& entry, int32_t global_rank, const v1::StepMetrics& metrics);
  // Begins moving the job off `node_id` when it consents and may; says what
  // was done, for the STRAGGLER event.
  std::string StragglerMoveLocked(Entry& entry, const std::string& node_id, const std::string& host);
  // The node the job keeps off after a straggler move, while it does.
  std::set<std::string> StragglerAvoidedLocked(const Entry& entry) const;
  // Counts a rank failure of the job on `node_id` towards the node's
  // quarantine; cordons the node (cordoned_by "coordinator") when it is
  // due and no one cordoned it before, saying so in *why.
  void QuarantineIfDueLocked(const Entry& entry, const std::string& node_id, std::string* why);
  // CheckpointNow orders to every node of the current generation.
  void SendCheckpointNowLocked(Entry& entry);
  void SendCheckpointNowLocked(Entry& entry, const std::string& why);
  // Stops a preempted job's generation (PREEMPTED); `how` says what
  // happened to its checkpoint.
  absl::Status PreemptNowLocked(Entry& entry, const std::string& how);
  std::vector<StopOrder> StopOrdersLocked(const Entry& entry, const std::string& reason,
                                          const std::string& skip_node) const;
  // OK when `generation` is the job's current, active one; FAILED_PRECONDITION
  // ("generation 2 of job j-3 is over; current is 3") otherwise.
  absl::Status FenceLocked(const Entry& entry, int64_t generation) const;
  // The start order of the job's current generation for one node, given
  // that node's slice of the placement (PlacementSlices).
  StartOrder StartOrderLocked(const Entry& entry, const std::string& node_id, v1::Placement slice) const;

  const Clock* clock_;
  Store* store_;
  NodeRegistry* nodes_;
  CheckpointRegistry* checkpoints_;
  Rendezvous* rendezvous_;
  const JobControllerOptions options_;
  std::vector<JobListener*> listeners_;  // set before traffic; read-only after
  NodeQuarantine quarantine_;  // across jobs; its own lock
  NodeFailureLog failure_log_;  // across jobs (the auto checkpoint interval); its own lock

  mutable std::mutex table_mu_;
  std::map<std::string, std::shared_ptr<Entry>> jobs_;  // by id; guarded by table_mu_
  JobViews views_;
};

// Whether a job in state `s` has a generation placed (PLACED, STARTING, RUNNING).
bool ActiveState(v1::JobState s);
// The job's queue: spec.queue, or "default" for a job stored before queues
// existed (the queue of a coordinator without a queues file).
std::string QueueOf(const v1::JobSpec& spec);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_LIFECYCLE_H_
