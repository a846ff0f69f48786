#ifndef RINGMASTER_COORDINATOR_JOB_CONTROLLER_H_
#define RINGMASTER_COORDINATOR_JOB_CONTROLLER_H_

// JobController: the job state machine and the glue between the core
// classes. What the gRPC services need, as plain C++ (no gRPC here):
//
//   JobService         Submit, GetJob, GetEvents, ListJobs, Cancel,
//                      GetRankProgress, ListCheckpoints (+ NodeRegistry for ListNodes)
//   NodeService        RegisterNode, AssignmentsForNode, ReportRankExit,
//                      ReportProgress (+ NodeRegistry::Heartbeat/CheckSession)
//   CheckpointService  CommitCheckpoint, LatestCheckpoint
//   RendezvousService  the Rendezvous itself (this class is its listener)
//
// Owns every job's state: QUEUED -> PLACED -> STARTING -> RUNNING ->
// (RESTARTING -> STARTING -> RUNNING)* -> SUCCEEDED | FAILED | CANCELLED
// (job_state_machine.h has the table). Every transition is written to the
// Store with its JobEvent (and, when placing, the placement) in one
// transaction BEFORE it is applied in memory or announced; if the write
// fails, nothing changed.
//
// Drives: the Scheduler (ScheduleNow, on Tick), the NodeRegistry (slots held
// by each generation's ranks: reserved when placed, released rank by rank
// as exits are reported, or all at once when a node is lost), the
// Rendezvous (one generation at a time per job) and the CheckpointRegistry
// (fencing commits to the current generation; resume from the latest).
//
// Time: Tick() (call it about once a second) expires node leases, restarts
// generations that made no progress for restart.progress_timeout_seconds,
// lets the Rendezvous fail generations past their deadline, and schedules.
//
// Threading: thread-safe; one mutex guards all job state. Lock order:
// JobController -> {NodeRegistry, CheckpointRegistry, Rendezvous} -> Store.
// JobListener callbacks run WITH the controller's mutex held, in the order
// the changes happened: a listener must not block and must not call back
// into the JobController (queue the work instead). The Rendezvous reports
// to this class without its own lock held (see rendezvous.h).

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
#include "coordinator/core/node_registry.h"
#include "coordinator/core/node_strikes.h"
#include "coordinator/core/rendezvous.h"
#include "coordinator/core/scheduler.h"
#include "coordinator/store/store.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"
#include "proto/node.pb.h"

namespace ringmaster::coordinator {

struct JobControllerOptions {
  // Every rank of a generation must join its rendezvous within this time of
  // the start orders, or the generation fails.
  absl::Duration rendezvous_timeout = absl::Minutes(5);
  // Between SIGTERM and SIGKILL when ranks are stopped.
  absl::Duration stop_grace_period = absl::Seconds(30);
  // A job's checkpoints go to <root>/<job id>/gen-<generation>, where root is
  // checkpoint_root, or the spec's checkpoint.directory when it names one:
  // it must then lie within checkpoint_root or one of allowed_checkpoint_roots
  // (INVALID_ARGUMENT at submission otherwise). One job's directory is never
  // another's.
  std::string checkpoint_root = "/var/lib/ringmaster/checkpoints";
  std::vector<std::string> allowed_checkpoint_roots;
  // A node where a job failed this often within the cool-down is left out of
  // that job's placements for the cool-down, while the job fits elsewhere.
  NodeStrikePolicy node_strikes;
  // Called after every scheduling pass over a non-empty queue with the time
  // it took (injected clock), for metrics. Runs under the controller's lock:
  // it must only record. May be empty.
  std::function<void(absl::Duration)> on_schedule_pass;
};

// What the scheduler sees of a job (its resources).
JobRequest RequestFor(const JobRecord& record);

struct SubmitOptions {
  std::string request_id;  // idempotency key, at most 128 characters; empty: none
  std::string user;        // recorded with the job
  bool validate_only = false;
};

// Start a generation's ranks on one node (NodeService StartRanks).
struct StartOrder {
  std::string node_id;
  std::string job_id;
  int64_t generation = 0;
  v1::JobSpec spec;                         // defaults applied
  // The generation's placement as this node needs it: every field, but
  // only this node's ranks (a node never receives the whole placement).
  v1::Placement placement;
  std::vector<int32_t> global_ranks;        // this node's, contiguous
  std::optional<v1::CheckpointInfo> resume_from;  // latest complete checkpoint
  std::string checkpoint_dir;
  absl::Time rendezvous_deadline;
  std::string rendezvous_secret;  // the generation's (Rendezvous::Secret); never logged
};

// Stop a generation's ranks on one node (NodeService StopRanks).
struct StopOrder {
  std::string node_id;
  std::string job_id;
  int64_t generation = 0;
  std::vector<int32_t> global_ranks;  // empty: all of the generation's ranks there
  absl::Duration grace_period;
  std::string reason;
  bool dump_state = false;  // the generation failed: ranks dump their state first
};

// Notified of every change, with the controller's mutex held (see above).
class JobListener {
 public:
  virtual ~JobListener() = default;
  // The job after a change (state, placement, message, progress,
  // checkpoint); `events` are the timeline entries recorded with it (may be
  // empty).
  virtual void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) = 0;
  virtual void OnStartRanks(const StartOrder& order) = 0;
  virtual void OnStopRanks(const StopOrder& order) = 0;
};

// A trainer process exited (ReportRankExitRequest).
struct RankExit {
  std::string node_id;
  std::string job_id;
  int64_t generation = 0;
  int32_t global_rank = 0;
  int32_t exit_code = 0;   // -1 when a signal killed it
  int32_t signal = 0;      // 0 if it exited
  bool stopped_by_worker = false;
  std::string stderr_tail;
};

// A rank could not resume from the committed checkpoint it was given
// (ReportDamagedCheckpointRequest).
struct DamagedCheckpoint {
  std::string job_id;
  int64_t generation = 0;  // the reporting rank's
  int32_t rank = 0;
  int64_t checkpoint_generation = 0;
  int64_t checkpoint_step = 0;
  std::string reason;
};

// A worker could not start a generation's ranks (StartRanksResult.error).
struct StartFailure {
  std::string node_id;
  std::string job_id;
  int64_t generation = 0;
  std::string error;
  bool unrecoverable = false;  // the node refuses the spec: no restart can help
  std::vector<int32_t> started;  // the ranks that did start (their exits come as usual)
};

// A rank process a worker reports as alive (RegisterNodeRequest.running_ranks).
struct RunningRank {
  std::string job_id;
  int64_t generation = 0;
  int32_t global_rank = 0;
};

struct NodeRegistrationResult {
  NodeRegistration registration;
  std::vector<StopOrder> stop;  // running ranks whose generation is over
};

struct ListJobsQuery {
  std::vector<v1::JobState> states;                 // empty: all
  std::map<std::string, std::string> label_selector;  // all must match
  int32_t page_size = 0;                            // [0, 1000]; 0: 100
  std::string page_token;                           // from the previous page
};

struct ListJobsPage {
  std::vector<v1::Job> jobs;  // newest submission first
  std::string next_page_token;  // empty on the last page
};

struct CancelResult {
  v1::Job job;
  std::vector<StopOrder> stop;  // also announced to listeners
};

class JobController : public RendezvousListener {
 public:
  JobController(const Clock* clock, Store* store, NodeRegistry* nodes, CheckpointRegistry* checkpoints,
                Rendezvous* rendezvous, JobControllerOptions options = {});

  // Before Recover and before any traffic. Not owned; must outlive this.
  void AddListener(JobListener* listener);

  // Loads every job from the store (after NodeRegistry::Recover and
  // CheckpointRegistry::Recover). QUEUED jobs keep their queue position;
  // RUNNING jobs continue (their slots reserved again, a RECOVERED event);
  // PLACED/STARTING jobs, whose rendezvous state was lost, restart their
  // generation; terminal jobs stay as they are.
  absl::Status Recover();

  // ---- JobService ----

  // Applies defaults, validates (INVALID_ARGUMENT naming the field), stores
  // the job and its SUBMITTED event durably, queues it. A request_id already
  // used returns that job. validate_only: stores nothing; the job has no id.
  // The job's `unschedulable` says why when no node registered now could
  // ever run it (it is queued all the same).
  absl::StatusOr<v1::Job> Submit(v1::JobSpec spec, const SubmitOptions& options);
  // NOT_FOUND for an unknown id.
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id) const;
  absl::StatusOr<std::vector<v1::JobEvent>> GetEvents(const std::string& job_id, int64_t after_sequence) const;
  // WatchJob's start: calls `at_snapshot` with the job and its events after
  // `after_sequence`, both read at one moment under the controller's lock,
  // so that a JobListener subscription made inside `at_snapshot` receives
  // exactly the changes that follow it. `at_snapshot` runs under the lock:
  // the JobListener rules apply (record, never call back). NOT_FOUND.
  absl::Status SnapshotJob(
      const std::string& job_id, int64_t after_sequence,
      const std::function<void(const v1::Job&, const std::vector<v1::JobEvent>&)>& at_snapshot) const;
  // INVALID_ARGUMENT for a page_size outside [0, 1000] or a foreign token.
  absl::StatusOr<ListJobsPage> ListJobs(const ListJobsQuery& query) const;
  // Any non-terminal state -> CANCELLED, stopping the current generation's
  // ranks; a terminal job is returned unchanged. NOT_FOUND.
  absl::StatusOr<CancelResult> Cancel(const std::string& job_id, const std::string& reason);
  // The latest step metrics of each rank of the current generation.
  absl::StatusOr<std::map<int32_t, v1::StepMetrics>> GetRankProgress(const std::string& job_id) const;
  absl::StatusOr<std::vector<v1::CheckpointInfo>> ListCheckpoints(const std::string& job_id,
                                                                  bool include_incomplete) const;

  // ---- NodeService ----

  // Registers the node and reconciles what the worker says is running:
  // ranks of generations that are over get stop orders (and keep their
  // slots until their exits are reported); ranks of a RUNNING generation
  // placed on this node that are no longer running fail that generation.
  absl::StatusOr<NodeRegistrationResult> RegisterNode(const v1::NodeInfo& node,
                                                      const std::vector<RunningRank>& running);
  // What should run on a node now: a start order per current generation
  // placed there (sent when a worker's session opens; workers treat a start
  // order for ranks already running as done).
  std::vector<StartOrder> AssignmentsForNode(const std::string& node_id) const;
  // The same, with `at_snapshot` called with the orders under the
  // controller's lock (listener rules apply), so that a session attached
  // inside it receives every later order after these: a stop order of a
  // generation can never be overtaken by that generation's start order.
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

  // ---- time ----

  // Lost nodes, progress timeouts, rendezvous deadlines, then ScheduleNow.
  void Tick();
  // One scheduling pass over QUEUED and RESTARTING jobs.
  void ScheduleNow();

  // ---- RendezvousListener ----
  void OnRendezvousComplete(const std::string& job_id, int64_t generation) override;
  void OnRendezvousFailed(const std::string& job_id, int64_t generation, const std::string& reason) override;

 private:
  struct JobEntry {
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
  };

  // job_controller.cc
  // INVALID_ARGUMENT naming checkpoint.directory unless it is empty or within
  // an allowed root.
  absl::Status CheckCheckpointRoot(const std::string& directory) const;
  // <root>/<job id>/gen-<generation> of the job's current generation.
  std::string CheckpointDirLocked(const v1::Job& job) const;
  v1::Job SnapshotLocked(const JobEntry& entry) const;
  void NotifyJobLocked(const JobEntry& entry, const std::vector<v1::JobEvent>& events);
  void NotifyStopLocked(const std::vector<StopOrder>& orders);
  v1::JobEvent MakeEvent(const JobEntry& entry, v1::JobEventKind kind, v1::JobState to, const std::string& reason,
                         int32_t rank = -1, const std::string& node_id = "") const;
  // Writes `next` with `events` (and `placement`) in one transaction, then
  // applies it to `entry` and notifies. Every event's transition must be legal.
  absl::Status CommitLocked(JobEntry& entry, JobRecord next, std::vector<v1::JobEvent> events,
                            const v1::Placement* placement = nullptr);
  JobEntry* FindLocked(const std::string& job_id);
  const JobEntry* FindLocked(const std::string& job_id) const;

  // job_controller_lifecycle.cc
  void ScheduleLocked();
  // Elastic jobs (restart.elastic): how many nodes to ask for now, between
  // min_nodes and resources.nodes: fewer only while fewer schedulable nodes
  // could hold the job at all (lost or drained ones), never because some are
  // busy for a moment.
  int32_t ElasticNodesLocked(const JobEntry& entry, const std::vector<NodeCapacity>& capacity,
                             const std::set<std::string>& excluded) const;
  // The nodes in the job's cool-down, unless it needs them to be placed at all.
  std::set<std::string> ExcludedNodesLocked(const JobEntry& entry, const std::vector<NodeCapacity>& capacity) const;
  absl::Status PlaceLocked(JobEntry& entry, const JobPlacement& granted);
  void DispatchLocked(JobEntry& entry);
  absl::Status MarkRunningLocked(JobEntry& entry, const std::string& why);
  // One failure of a job's current generation.
  struct GenerationFailure {
    v1::JobEventKind kind = v1::JOB_EVENT_KIND_RANK_EXITED;
    std::string reason;
    int32_t rank = -1;
    std::string node_id;    // the node it happened on (node strikes), if known
    std::string lost_node;  // a lost node: no stop order is sent there
    bool unrecoverable = false;  // no restart can fix it: FAILED at once
  };
  // A failure of the current generation: RESTARTING, or FAILED when it is
  // unrecoverable or no restarts are left (RestartCounts says which restarts
  // use them up). Stops the generation's ranks (except on the lost node).
  absl::Status FailGenerationLocked(JobEntry& entry, const GenerationFailure& failure);
  std::vector<StopOrder> StopOrdersLocked(const JobEntry& entry, const std::string& reason,
                                          const std::string& skip_node) const;
  void HandleLostNodesLocked();
  void CheckProgressLocked();
  // OK when `generation` is the job's current, active one; FAILED_PRECONDITION
  // ("generation 2 of job j-3 is over; current is 3") otherwise.
  absl::Status FenceLocked(const JobEntry& entry, int64_t generation) const;
  // The start order of the job's current generation for one node, given
  // that node's slice of the placement (PlacementSlices).
  StartOrder StartOrderLocked(const JobEntry& entry, const std::string& node_id, v1::Placement slice) const;
  std::vector<StartOrder> AssignmentsLocked(const std::string& node_id) const;

  const Clock* clock_;
  Store* store_;
  NodeRegistry* nodes_;
  CheckpointRegistry* checkpoints_;
  Rendezvous* rendezvous_;
  const JobControllerOptions options_;
  std::vector<JobListener*> listeners_;

  mutable std::mutex mu_;
  std::map<std::string, JobEntry> jobs_;  // by id
  std::set<std::string> lost_nodes_;      // lost, not yet fully handled
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_JOB_CONTROLLER_H_
