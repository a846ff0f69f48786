// JobLifecycle: the generations' lifecycle (begin, running, failure,
// restart, success), progress, checkpoints, time.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/exit_codes.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "coordinator/core/goodput.h"
#include "coordinator/core/job_admission.h"
#include "coordinator/core/job_lifecycle.h"
#include "coordinator/core/job_state_machine.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

std::string Hostname(const v1::Placement& p, int32_t rank) {
  return rank >= 0 && rank < p.ranks_size() ? p.ranks(rank).hostname() : "";
}

// Each node's slice of a placement, in node order: every field, and that
// node's ranks (contiguous per node, rank_layout.h). One pass over the ranks.
std::vector<std::pair<std::string, v1::Placement>> PlacementSlices(const v1::Placement& placement) {
  v1::Placement shape = placement;
  shape.clear_ranks();
  std::vector<std::pair<std::string, v1::Placement>> slices;
  for (const v1::RankAssignment& r : placement.ranks()) {
    if (slices.empty() || slices.back().first != r.node_id()) slices.emplace_back(r.node_id(), shape);
    *slices.back().second.add_ranks() = r;
  }
  return slices;
}

// "rank 3 on host-b exited with code 1: <last stderr line>"
std::string DescribeExit(const RankExit& exit, const std::string& hostname) {
  std::string what;
  if (exit.stopped_by_worker) {
    what = "was stopped by its worker";
  } else if (exit.signal != 0) {
    what = absl::StrCat("was killed by signal ", exit.signal);
  } else {
    what = absl::StrCat("exited with code ", exit.exit_code);
  }
  std::string out = absl::StrCat("rank ", exit.global_rank, " on ", hostname.empty() ? exit.node_id : hostname, " ", what);
  std::vector<absl::string_view> lines = absl::StrSplit(exit.stderr_tail, '\n', absl::SkipWhitespace());
  if (!lines.empty()) absl::StrAppend(&out, ": ", lines.back().substr(0, 200));
  return out;
}

}  // namespace

// ---- beginning a generation ----

absl::Status JobLifecycle::BeginGeneration(const std::string& job_id, int64_t after_generation,
                                           const v1::Placement& placement, const std::string& where) {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return JobNotFoundError(job_id);
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  const v1::Job& job = entry.record.job;
  const v1::JobState state = job.state();
  if ((state != v1::JOB_STATE_QUEUED && state != v1::JOB_STATE_RESTARTING) || job.generation() != after_generation ||
      placement.generation() != after_generation + 1) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " is no longer waiting at generation ",
                                                      after_generation, " (", StateName(state), ", generation ",
                                                      job.generation(), ")"));
  }
  const v1::JobSpec& spec = job.spec();
  const int64_t gen = placement.generation();
  JobRecord next = entry.record;
  next.job.set_generation(gen);
  next.job.clear_unschedulable();
  v1::JobEvent event;
  if (state == v1::JOB_STATE_QUEUED) {
    next.job.set_state(v1::JOB_STATE_PLACED);
    next.job.set_message(absl::StrCat("placed on ", where));
    event = MakeEvent(entry, v1::JOB_EVENT_KIND_PLACED, v1::JOB_STATE_PLACED, next.job.message());
  } else {  // RESTARTING: the new generation's placement goes with RESTARTING -> STARTING
    next.job.set_state(v1::JOB_STATE_STARTING);
    const bool counted = RestartCounts(job.reason());
    if (counted) next.job.set_restarts(job.restarts() + 1);
    absl::StatusOr<v1::CheckpointInfo> resume = checkpoints_->Latest(job.id());
    next.job.set_message(absl::StrCat(
        counted ? absl::StrCat("restart ", next.job.restarts(), " of ", spec.restart().max_restarts())
                : absl::StrCat("restart after ", job.reason(), " (not counted against max_restarts ",
                               spec.restart().max_restarts(), ")"),
        ": generation ", gen, " on ", where, "; ",
        resume.ok() ? absl::StrCat("resuming from step ", resume->step()) : std::string("starting from scratch")));
    event = MakeEvent(entry, v1::JOB_EVENT_KIND_RESTARTING, v1::JOB_STATE_STARTING, next.job.message());
  }
  event.set_generation(gen);
  RETURN_IF_ERROR(CommitLocked(entry, std::move(next), {event}, &placement));
  DispatchLocked(entry);
  return absl::OkStatus();
}

StartOrder JobLifecycle::StartOrderLocked(const Entry& entry, const std::string& node_id, v1::Placement slice) const {
  const v1::Job& job = entry.record.job;
  StartOrder order;
  for (const v1::RankAssignment& r : slice.ranks()) order.global_ranks.push_back(r.global_rank());
  order.node_id = node_id;
  order.job_id = job.id();
  order.generation = job.generation();
  order.spec = job.spec();
  // The generation's own shape (an elastic job may run on fewer nodes).
  order.spec.mutable_resources()->set_nodes(job.placement().nodes());
  order.spec.mutable_parallelism()->set_data(job.placement().data_parallel_size());
  order.placement = std::move(slice);
  if (entry.resume_chosen) {
    order.resume_from = entry.resume_from;
  } else if (absl::StatusOr<v1::CheckpointInfo> resume = checkpoints_->Latest(job.id()); resume.ok()) {
    order.resume_from = *std::move(resume);
  }
  // Each generation writes into its own directory: a cut-off rank of an older
  // generation (a partitioned node keeps running) can never overwrite a
  // checkpoint the current one committed. Resuming reads the recorded path.
  order.checkpoint_dir = CheckpointDir(job);
  order.checkpoint_roots = CheckpointRoots(options_);
  order.rendezvous_deadline = entry.rendezvous_deadline;
  order.rendezvous_secret = rendezvous_->Secret(job.id(), job.generation());
  order.owner = job.owner();
  order.auto_interval = entry.auto_interval;
  return order;
}

void JobLifecycle::DispatchLocked(Entry& entry) {
  const v1::Job& job = entry.record.job;
  entry.progress.clear();
  entry.stepping = false;
  entry.exited_ok.clear();
  entry.drain.reset();
  entry.preempt.reset();
  views_.ClearProgress(job.id());
  // A program need not join the coordinator's rendezvous (it may meet its
  // peers at MASTER_ADDR): no deadline; it runs once its ranks are started.
  const bool program = job.spec().has_program();
  entry.rendezvous_deadline = program ? absl::InfiniteFuture() : clock_->Now() + options_.rendezvous_timeout;
  absl::StatusOr<v1::CheckpointInfo> resume = checkpoints_->Latest(job.id());
  entry.resume_chosen = true;
  entry.resume_from = resume.ok() ? std::optional<v1::CheckpointInfo>(*std::move(resume)) : std::nullopt;
  if (!program) ChooseCheckpointIntervalLocked(entry);
  rendezvous_->BeginGeneration(job.id(), job.generation(), job.placement().world_size(), entry.rendezvous_deadline);
  std::vector<std::pair<std::string, v1::Placement>> slices = PlacementSlices(job.placement());
  for (auto& [node_id, slice] : slices) {
    const StartOrder order = StartOrderLocked(entry, node_id, std::move(slice));
    for (JobListener* l : listeners_) l->OnStartRanks(order);
  }
  const size_t node_count = slices.size();
  if (program) {
    const std::string why = absl::StrCat("program started on ", job.placement().world_size(), " ranks, ", node_count,
                                         node_count == 1 ? " node" : " nodes");
    if (absl::Status s = MarkRunningLocked(entry, why); !s.ok()) {
      spdlog::error("job {}: RUNNING not stored: {}", job.id(), s.ToString());
    }
    return;
  }
  if (job.state() != v1::JOB_STATE_PLACED) return;
  JobRecord next = entry.record;
  next.job.set_state(v1::JOB_STATE_STARTING);
  next.job.set_message(absl::StrCat("starting ", job.placement().world_size(), " ranks on ", node_count,
                                    node_count == 1 ? " node" : " nodes", "; rendezvous deadline in ",
                                    absl::FormatDuration(options_.rendezvous_timeout)));
  v1::JobEvent event = MakeEvent(entry, v1::JOB_EVENT_KIND_STARTING, v1::JOB_STATE_STARTING, next.job.message());
  if (absl::Status s = CommitLocked(entry, std::move(next), {event}); !s.ok()) {
    // Stays PLACED; MarkRunningLocked and FailGenerationLocked handle that.
    spdlog::error("job {}: STARTING not stored: {}", job.id(), s.ToString());
  }
}

absl::Status JobLifecycle::MarkRunningLocked(Entry& entry, const std::string& why) {
  const v1::JobState from = entry.record.job.state();
  if (from != v1::JOB_STATE_PLACED && from != v1::JOB_STATE_STARTING) return absl::OkStatus();
  JobRecord next = entry.record;
  next.job.set_state(v1::JOB_STATE_RUNNING);
  next.job.set_message(absl::StrCat("running: ", why));
  if (!next.job.has_start_time()) *next.job.mutable_start_time() = ToProtoTime(clock_->Now());
  std::vector<v1::JobEvent> events;
  if (from == v1::JOB_STATE_PLACED) {
    events.push_back(MakeEvent(entry, v1::JOB_EVENT_KIND_STARTING, v1::JOB_STATE_STARTING, "start orders sent"));
  }
  events.push_back(MakeEvent(entry, v1::JOB_EVENT_KIND_RUNNING, v1::JOB_STATE_RUNNING, why));
  events.back().set_from_state(v1::JOB_STATE_STARTING);
  RETURN_IF_ERROR(CommitLocked(entry, std::move(next), std::move(events)));
  entry.last_progress = clock_->Now();
  return absl::OkStatus();
}

bool JobLifecycle::ReportsProgressLocked(const Entry& entry) const {
  return !entry.record.job.spec().has_program() || !entry.progress.empty();
}

// ---- failure, restart, success ----

std::vector<StopOrder> JobLifecycle::StopOrdersLocked(const Entry& entry, const std::string& reason,
                                                      const std::string& skip_node) const {
  std::vector<StopOrder> orders;
  const v1::Job& job = entry.record.job;
  if (job.generation() == 0) return orders;
  for (const v1::RankAssignment& r : job.placement().ranks()) {
    if (r.node_id() == skip_node) continue;
    if (!orders.empty() && orders.back().node_id == r.node_id()) continue;
    orders.push_back({r.node_id(), job.id(), job.generation(), {}, options_.stop_grace_period, reason});
  }
  return orders;
}

absl::Status JobLifecycle::FailGenerationLocked(Entry& entry, const GenerationFailure& failure) {
  const v1::Job& job = entry.record.job;
  if (!ActiveState(job.state())) return absl::OkStatus();
  std::string why = failure.reason;
  const std::string blamed = !failure.lost_node.empty() ? failure.lost_node : failure.node_id;
  if ((failure.kind == v1::JOB_EVENT_KIND_RANK_EXITED || failure.kind == v1::JOB_EVENT_KIND_NODE_LOST) &&
      !failure.unrecoverable && !blamed.empty() && entry.strikes.Record(blamed, clock_->Now(), options_.node_strikes) &&
      ExcludedNodesLocked(entry, nodes_->SchedulableCapacity()).count(blamed) > 0) {
    absl::StatusOr<v1::NodeInfo> info = nodes_->GetNode(blamed);
    absl::StrAppend(&why, "; node ", info.ok() ? info->hostname() : blamed, " is left out of this job for ",
                    absl::FormatDuration(options_.node_strikes.cooldown), " (", options_.node_strikes.limit,
                    " failures)");
  }
  if (failure.kind == v1::JOB_EVENT_KIND_RANK_EXITED && failure.quarantine_count && !failure.unrecoverable &&
      !failure.node_id.empty()) {
    QuarantineIfDueLocked(entry, failure.node_id, &why);
  }
  if (((failure.kind == v1::JOB_EVENT_KIND_RANK_EXITED && failure.quarantine_count) ||
       failure.kind == v1::JOB_EVENT_KIND_NODE_LOST) &&
      !failure.unrecoverable && !blamed.empty()) {
    failure_log_.Record(blamed, clock_->Now(), options_.checkpoint_interval.failure_window);
  }
  const int32_t max_restarts = job.spec().restart().max_restarts();
  const std::string reason_code = failure.unrecoverable ? "Unrecoverable" : ReasonCode(failure.kind);
  const bool counted = RestartCounts(reason_code);
  const bool give_up = failure.unrecoverable || (counted && job.restarts() >= max_restarts);
  JobRecord next = entry.record;
  next.job.set_reason(reason_code);
  std::string stop_reason;
  v1::JobEvent event;
  if (give_up) {
    next.job.set_state(v1::JOB_STATE_FAILED);
    next.job.set_message(absl::StrCat(why, failure.unrecoverable
                                               ? "; not restarted: a restart cannot fix this"
                                               : absl::StrCat("; no restarts left (max_restarts ", max_restarts, ")")));
    *next.job.mutable_end_time() = ToProtoTime(clock_->Now());
    event = MakeEvent(entry, failure.kind, v1::JOB_STATE_FAILED, next.job.message(), failure.rank, failure.node_id);
    stop_reason = absl::StrCat("job failed: ", why);
  } else {
    next.job.set_state(v1::JOB_STATE_RESTARTING);
    next.job.set_message(absl::StrCat(
        why, counted ? absl::StrCat("; restarting (restart ", job.restarts() + 1, " of ", max_restarts, ")")
                     : std::string("; restarting (not counted against max_restarts)")));
    event = MakeEvent(entry, failure.kind, v1::JOB_STATE_RESTARTING, next.job.message(), failure.rank,
                      failure.node_id);
    stop_reason = absl::StrCat("generation ", job.generation(), " restarting: ", why);
  }
  std::vector<StopOrder> stop = StopOrdersLocked(entry, stop_reason, failure.lost_node);
  for (StopOrder& order : stop) {
    order.dump_state = failure.dump_state;
    // A peer's exit fails the survivors' collectives at once: they may carry
    // on in the next generation in their processes. A lost node or a hang
    // leaves them blocked: they are stopped (and dumped) at once, as before.
    order.restarting = !give_up && failure.kind == v1::JOB_EVENT_KIND_RANK_EXITED;
  }
  RETURN_IF_ERROR(CommitLocked(entry, std::move(next), {event}));
  entry.failure_detected = give_up ? absl::InfinitePast() : clock_->Now();
  entry.drain.reset();
  entry.preempt.reset();
  rendezvous_->EndGeneration(entry.record.job.id(), entry.record.job.generation());
  NotifyStopLocked(stop);
  return absl::OkStatus();
}

absl::Status JobLifecycle::ReportRankExit(const RankExit& exit) {
  std::shared_ptr<Entry> found = Find(exit.job_id);
  if (found == nullptr) {
    nodes_->Release(exit.node_id, exit.job_id, exit.generation, exit.global_rank);
    return absl::OkStatus();
  }
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  nodes_->Release(exit.node_id, exit.job_id, exit.generation, exit.global_rank);
  const v1::Job& job = entry.record.job;
  if (exit.generation != job.generation() || !ActiveState(job.state())) return absl::OkStatus();  // over: ignored
  const std::string hostname = Hostname(job.placement(), exit.global_rank);
  const bool success = exit.exit_code == 0 && exit.signal == 0 && !exit.stopped_by_worker;
  if (!success) {
    GenerationFailure failure;
    failure.reason = DescribeExit(exit, hostname);
    failure.rank = exit.global_rank;
    failure.node_id = exit.node_id;
    failure.unrecoverable = exit.exit_code == kExitUnrecoverable && exit.signal == 0 && !exit.stopped_by_worker;
    failure.quarantine_count = !exit.stopped_by_worker;
    return FailGenerationLocked(entry, failure);
  }
  entry.exited_ok.insert(exit.global_rank);
  if (static_cast<int32_t>(entry.exited_ok.size()) < job.placement().world_size()) return absl::OkStatus();
  JobRecord next = entry.record;
  next.job.set_state(v1::JOB_STATE_SUCCEEDED);
  next.job.set_reason(ReasonCode(v1::JOB_EVENT_KIND_SUCCEEDED));
  next.job.set_message(absl::StrCat("all ", job.placement().world_size(), " ranks exited 0"));
  *next.job.mutable_end_time() = ToProtoTime(clock_->Now());
  std::vector<v1::JobEvent> events;
  if (job.state() == v1::JOB_STATE_PLACED) {
    events.push_back(MakeEvent(entry, v1::JOB_EVENT_KIND_STARTING, v1::JOB_STATE_STARTING, "start orders sent"));
  }
  events.push_back(MakeEvent(entry, v1::JOB_EVENT_KIND_SUCCEEDED, v1::JOB_STATE_SUCCEEDED, next.job.message()));
  if (job.state() == v1::JOB_STATE_PLACED) events.back().set_from_state(v1::JOB_STATE_STARTING);
  RETURN_IF_ERROR(CommitLocked(entry, std::move(next), std::move(events)));
  rendezvous_->EndGeneration(exit.job_id, exit.generation);
  return absl::OkStatus();
}

absl::Status JobLifecycle::ReportStartFailure(const StartFailure& failure) {
  std::shared_ptr<Entry> found = Find(failure.job_id);
  std::unique_lock<std::mutex> lock;
  if (found != nullptr) lock = std::unique_lock<std::mutex>(found->mu);
  // Ranks that never started report no exit: their slots go now.
  for (const RankSlot& slot : nodes_->SlotsOn(failure.node_id)) {
    if (slot.job_id != failure.job_id || slot.generation != failure.generation) continue;
    if (std::find(failure.started.begin(), failure.started.end(), slot.global_rank) != failure.started.end()) continue;
    nodes_->Release(failure.node_id, slot.job_id, slot.generation, slot.global_rank);
  }
  if (found == nullptr) return absl::OkStatus();
  Entry& entry = *found;
  const v1::Job& job = entry.record.job;
  if (failure.generation != job.generation() || !ActiveState(job.state())) return absl::OkStatus();
  absl::StatusOr<v1::NodeInfo> node = nodes_->GetNode(failure.node_id);
  GenerationFailure f;
  f.reason = absl::StrCat("the worker on ", node.ok() ? node->hostname() : failure.node_id,
                          " could not start its ranks: ", failure.error);
  f.node_id = failure.node_id;
  f.unrecoverable = failure.unrecoverable;
  f.quarantine_count = false;
  return FailGenerationLocked(entry, f);
}

absl::StatusOr<bool> JobLifecycle::ReportProgress(const std::string& job_id, int64_t generation, int32_t global_rank,
                                                  const v1::StepMetrics& metrics) {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return JobNotFoundError(job_id);
  Entry& entry = *found;
  {
    std::lock_guard<std::mutex> lock(entry.mu);
    if (generation != entry.record.job.generation() || !ActiveState(entry.record.job.state())) return true;
  }
  // A rank making steps has joined; outside the job's lock (it may call back).
  rendezvous_->CheckIn({job_id, generation, global_rank}).IgnoreError();
  std::lock_guard<std::mutex> lock(entry.mu);
  if (generation != entry.record.job.generation() || !ActiveState(entry.record.job.state())) return true;
  entry.progress[global_rank] = metrics;
  entry.last_progress = clock_->Now();
  views_.PublishProgress(job_id, global_rank, metrics);
  CheckStragglerLocked(entry, global_rank, metrics);
  if (entry.record.job.state() != v1::JOB_STATE_RUNNING) {
    RETURN_IF_ERROR(MarkRunningLocked(entry, absl::StrCat("rank ", global_rank, " reported step ", metrics.step())));
  } else if (global_rank == 0) {
    NotifyJobLocked(entry, {});
  }
  AnnounceSteppingIfDueLocked(entry);
  return false;
}

// ---- checkpoints ----

absl::Status JobLifecycle::FenceLocked(const Entry& entry, int64_t generation) const {
  const v1::Job& job = entry.record.job;
  if (generation < job.generation()) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", generation, " of job ", job.id(),
                                                      " is over; current is ", job.generation()));
  }
  if (generation > job.generation()) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", generation, " of job ", job.id(),
                                                      " is not known; current is ", job.generation()));
  }
  if (!ActiveState(job.state())) {
    return absl::FailedPreconditionError(absl::StrCat("generation ", generation, " of job ", job.id(),
                                                      " is over (the job is ", StateName(job.state()), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CommitResult> JobLifecycle::CommitCheckpoint(const ShardCommit& commit) {
  std::shared_ptr<Entry> found = Find(commit.job_id);
  if (found == nullptr) return JobNotFoundError(commit.job_id);
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  RETURN_IF_ERROR(FenceLocked(entry, commit.generation));
  const v1::Job& job = entry.record.job;
  const int32_t stages = job.spec().parallelism().pipeline();
  if (commit.pipeline_stages != stages) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline_stages: job ", job.id(), " has ", stages,
                                                   " pipeline stages, got ", commit.pipeline_stages));
  }
  v1::JobEvent event = MakeEvent(entry, v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED, job.state(),
                                 absl::StrCat("checkpoint at step ", commit.step, " committed: ", commit.path));
  event.set_checkpoint_write_seconds(std::max(0.0, commit.write_seconds));
  // The stall when known (goodput.h), else the write was the stall.
  if (commit.stall_seconds.has_value()) event.set_checkpoint_stall_seconds(std::max(0.0, *commit.stall_seconds));
  if (commit.stall_seconds.has_value() && *commit.stall_seconds > 0 && !entry.auto_interval.mtbf_basis().empty()) {
    // The ranks chose their next interval from this stall (the same function, the same inputs).
    entry.auto_interval.set_stall_seconds(*commit.stall_seconds);
    entry.checkpoint_interval = IntervalInForce(job.spec().checkpoint(), entry.auto_interval);
    entry.checkpoint_interval.set_stall_seconds(*commit.stall_seconds);
  }
  // The generation's own directory (the commit's generation is the job's
  // current one): any other path is PERMISSION_DENIED, nothing recorded.
  ASSIGN_OR_RETURN(CommitResult result, checkpoints_->Commit(commit, CheckpointDir(job), job.spec().checkpoint().keep(),
                                                            event, GoodputAfter(entry.goodput, {event})));
  if (result.event.has_value()) NotifyJobLocked(entry, {*result.event});
  if (result.event.has_value() && entry.preempt.has_value()) {
    // The checkpoint a preemption waited for: the job leaves its nodes now
    // (at the next tick if this fails; the commit itself stands).
    entry.preempt->saved_step = commit.step;
    if (absl::Status s = PreemptNowLocked(entry, absl::StrCat("checkpoint at step ", commit.step, " written"));
        !s.ok()) {
      spdlog::error("job {}: preemption not applied (retrying next tick): {}", commit.job_id, s.ToString());
    }
  } else if (result.event.has_value() && entry.drain.has_value()) {
    // The checkpoint a drain waited for: the job moves now (at the next
    // tick if this fails; the commit itself stands).
    entry.drain->saved_step = commit.step;
    const std::string why = absl::StrCat("checkpoint at step ", commit.step, " written");
    if (absl::Status s = MoveOffDrainedLocked(entry, entry.drain->node_id, entry.drain->hostname, why); !s.ok()) {
      spdlog::error("job {}: drain move not applied (retrying next tick): {}", commit.job_id, s.ToString());
    }
  }
  return result;
}

absl::Status JobLifecycle::ReportDamagedCheckpoint(const DamagedCheckpoint& report) {
  std::shared_ptr<Entry> found = Find(report.job_id);
  if (found == nullptr) return JobNotFoundError(report.job_id);
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  RETURN_IF_ERROR(FenceLocked(entry, report.generation));
  const v1::Job& job = entry.record.job;
  const std::string reason = report.reason.substr(0, 1024);
  const std::string what = absl::StrCat("checkpoint at step ", report.checkpoint_step, " (generation ",
                                        report.checkpoint_generation, ")");
  v1::JobEvent event = MakeEvent(entry, v1::JOB_EVENT_KIND_CHECKPOINT_DAMAGED, job.state(),
                                 absl::StrCat(what, " is damaged (rank ", report.rank, "): ", reason), report.rank);
  ASSIGN_OR_RETURN(bool marked, checkpoints_->MarkDamaged(report.job_id, report.checkpoint_generation,
                                                          report.checkpoint_step, reason, event));
  if (marked) NotifyJobLocked(entry, {});
  const bool resumed_from_it = entry.resume_chosen && entry.resume_from.has_value() &&
                               entry.resume_from->generation() == report.checkpoint_generation &&
                               entry.resume_from->step() == report.checkpoint_step;
  if (!resumed_from_it) return absl::OkStatus();
  absl::StatusOr<v1::CheckpointInfo> next = checkpoints_->Latest(job.id());
  return FailGenerationLocked(
      entry, {v1::JOB_EVENT_KIND_CHECKPOINT_DAMAGED,
              absl::StrCat("rank ", report.rank, " cannot resume from the ", what, ": ", reason, "; ",
                           next.ok() ? absl::StrCat("the next generation resumes from step ", next->step())
                                     : std::string("no good checkpoint is left: the next generation starts from "
                                                   "step 0")),
              report.rank});
}

// ---- time ----

void JobLifecycle::CheckProgress() {
  const absl::Time now = clock_->Now();
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    Entry& entry = *found;
    std::lock_guard<std::mutex> lock(entry.mu);
    if (entry.record.job.state() != v1::JOB_STATE_RUNNING) continue;
    if (!ReportsProgressLocked(entry)) continue;  // a program that never reports: no timeout
    const int32_t seconds = entry.record.job.spec().restart().progress_timeout_seconds();
    if (seconds <= 0 || now - entry.last_progress < absl::Seconds(seconds)) continue;
    absl::Status s = FailGenerationLocked(
        entry, {v1::JOB_EVENT_KIND_PROGRESS_TIMEOUT,
                absl::StrCat("no step progress for ", absl::FormatDuration(now - entry.last_progress))});
    if (!s.ok()) spdlog::error("job {}: progress timeout not applied: {}", entry.record.job.id(), s.ToString());
  }
}

void JobLifecycle::OnRendezvousComplete(const std::string& job_id, int64_t generation) {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return;
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  if (entry.record.job.generation() != generation) return;
  absl::Status s = MarkRunningLocked(
      entry, absl::StrCat("all ", entry.record.job.placement().world_size(), " ranks joined the rendezvous"));
  if (!s.ok()) spdlog::error("job {}: RUNNING not stored: {}", job_id, s.ToString());
}

void JobLifecycle::OnRendezvousFailed(const std::string& job_id, int64_t generation, const std::string& reason) {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return;
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  if (entry.record.job.generation() != generation) return;
  absl::Status s = FailGenerationLocked(entry, {v1::JOB_EVENT_KIND_RENDEZVOUS_TIMEOUT, reason});
  if (!s.ok()) spdlog::error("job {}: rendezvous failure not applied: {}", job_id, s.ToString());
}

}  // namespace ringmaster::coordinator
