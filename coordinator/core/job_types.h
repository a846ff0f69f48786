#ifndef RINGMASTER_COORDINATOR_CORE_JOB_TYPES_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_TYPES_H_

// The vocabulary the coordinator's job managers (JobLifecycle, Dispatcher,
// NodeReconciler) and their façade, JobController, share with the services:
// options, what workers and ranks report, the orders sent to workers, and
// the JobListener that receives them. Plain structs.

#include <cstdint>
#include <map>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/node_quarantine.h"
#include "coordinator/core/node_strikes.h"
#include "coordinator/core/queue_config.h"
#include "coordinator/core/scheduler.h"
#include "coordinator/core/failure_history.h"
#include "coordinator/core/straggler_detector.h"
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
  // The JobSpec.env names a job may set (common/env_policy.h): "@default"
  // (the built-in NCCL/CUDA tuning variables), exact names, or prefixes
  // ending in '*' ("NCCL_*") that never admit a variable loading code or
  // naming a path. Others are INVALID_ARGUMENT at submission.
  std::vector<std::string> allowed_env = {"@default"};
  // A node where a job failed this often within the cool-down is left out of
  // that job's placements for the cool-down, while the job fits elsewhere.
  NodeStrikePolicy node_strikes;
  // A node where ranks of this many distinct jobs failed within the window is
  // cordoned (cordoned_by "coordinator") until an operator uncordons it.
  QuarantinePolicy quarantine;
  // A drained node's job whose ranks wrote no checkpoint this long after
  // they were asked for one is moved all the same, from its newest one.
  absl::Duration drain_checkpoint_timeout = absl::Minutes(5);
  // A preempted job whose ranks wrote no checkpoint this long after they
  // were asked for one is stopped all the same, and resumes from its newest.
  absl::Duration preemption_grace = absl::Minutes(5);
  // Stragglers: the factor and steps a rank is flagged after (StragglerDetector),
  // and how often a consenting job may move off a straggler's node.
  StragglerPolicy stragglers;
  // checkpoint.interval auto: the operator's bounds and prior, and the
  // window of node failures the job's MTBF estimate counts.
  CheckpointIntervalPolicy checkpoint_interval;
  // The queues (the operator's queues file); unset: QueueConfig::Default(),
  // one queue holding everything.
  std::optional<QueueConfig> queues;
  // Called after every scheduling pass over a non-empty queue with the time
  // it took (injected clock), for metrics. Runs on the pass's thread, while
  // no other pass runs: it must only record. May be empty.
  std::function<void(absl::Duration)> on_schedule_pass;
};

// How long finished jobs (SUCCEEDED, FAILED, CANCELLED) are kept, with their
// timeline, checkpoint records and logs.
struct JobRetention {
  absl::Duration max_age = absl::Hours(30 * 24);  // since the job ended; <= 0: no age limit
  int max_count = 10000;                           // finished jobs kept, newest first; < 0: no limit
};

// What the scheduler sees of a job (its resources).
JobRequest RequestFor(const JobRecord& record);

struct SubmitOptions {
  std::string request_id;  // idempotency key, at most 128 characters; empty: none
  std::string user;        // recorded with the job
  bool validate_only = false;
  // SubmitJobRequest.overrides: the --set assignments already applied to the
  // spec, recorded with it (Job.submitted).
  std::vector<std::string> overrides;
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
  // checkpoint_root and allowed_checkpoint_roots (StartRanks.checkpoint_roots).
  std::vector<std::string> checkpoint_roots;
  absl::Time rendezvous_deadline;
  std::string rendezvous_secret;  // the generation's (Rendezvous::Secret); never logged
  std::string owner;  // Job.owner: a worker may run the ranks as its account
  v1::AutoIntervalInputs auto_interval;  // checkpoint.interval auto (StartRanks.auto_interval)
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
  // The job restarts in a new generation: rejoinable ranks may wait for it
  // in their process (StopRanks.restarting).
  bool restarting = false;
};

// Ask a generation's ranks on one node for a checkpoint now (NodeService
// CheckpointNow): a node of the job is being drained.
struct CheckpointOrder {
  std::string node_id;
  std::string job_id;
  int64_t generation = 0;
  std::string reason;
};

// Notified of every change, with the changed job's mutex held
// (job_lifecycle.h): a listener must only record or enqueue, never block or
// call back. Calls for different jobs may come from different threads at
// once; those for one job come in the order its changes happened.
class JobListener {
 public:
  virtual ~JobListener() = default;
  // The job after a change (state, placement, message, progress,
  // checkpoint); `events` are the timeline entries recorded with it (may be
  // empty).
  virtual void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) = 0;
  virtual void OnStartRanks(const StartOrder& order) = 0;
  virtual void OnStopRanks(const StopOrder& order) = 0;
  virtual void OnCheckpointNow(const CheckpointOrder& /*order*/) {}
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

// What answers about jobs may hold: a ListJobs page's summaries, serialized,
// stay below this (a page holds at least one job), and a WatchJob message's
// events (the first: the newest after its after_sequence) below this many.
inline constexpr size_t kMaxListJobsPageBytes = size_t{1} << 20;
inline constexpr int kMaxWatchEvents = 1000;
inline constexpr size_t kMaxWatchEventBytes = size_t{1} << 20;

struct ListJobsPage {
  std::vector<v1::JobSummary> jobs;  // newest submission first, bounded (above)
  std::string next_page_token;  // empty on the last page
};

struct DrainResult {
  v1::NodeInfo node;                 // after the request
  std::vector<std::string> job_ids;  // the jobs being moved off it
};

struct CancelResult {
  v1::Job job;
  std::vector<StopOrder> stop;  // also announced to listeners
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_TYPES_H_
