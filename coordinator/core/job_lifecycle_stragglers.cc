// JobLifecycle: stragglers (job_lifecycle.h, "stragglers"). A rank flagged
// by the job's StragglerDetector gets a STRAGGLER event; with the job's
// consent (restart.move_stragglers) the job then moves off that rank's node
// the way a drain moves it (checkpoint first, then NODE_DRAINED), except
// that the node is not cordoned: only this job keeps off it, for the
// policy's move window.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/core/job_lifecycle.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

// CheckpointNow orders are sent again this often while a move waits (as a drain's).
constexpr absl::Duration kMoveResend = absl::Seconds(30);

}  // namespace

void JobLifecycle::CheckStragglerLocked(Entry& entry, int32_t global_rank, const v1::StepMetrics& metrics) {
  const v1::Job& job = entry.record.job;
  const StragglerPolicy& policy = options_.stragglers;
  if (job.state() != v1::JOB_STATE_RUNNING || global_rank < 0 || global_rank >= job.placement().ranks_size()) return;
  const v1::RankAssignment& where = job.placement().ranks(global_rank);
  std::optional<StragglerChange> change =
      entry.stragglers.Observe(job.generation(), global_rank, where.pipeline_rank(), metrics, policy);
  if (!change.has_value()) return;
  const std::string host = where.hostname().empty() ? where.node_id() : where.hostname();
  std::string why;
  v1::JobEventKind kind = v1::JOB_EVENT_KIND_STRAGGLER_RECOVERED;
  if (change->flagged) {
    kind = v1::JOB_EVENT_KIND_STRAGGLER;
    why = absl::StrFormat(
        "rank %d on node %s is a straggler: its own work per step (step time less communication) is %.2fx its "
        "peers' median since step %d (threshold %.2fx for %d steps)",
        global_rank, host, change->ratio, change->since_step, policy.factor, policy.steps);
    absl::StrAppend(&why, "; ", StragglerMoveLocked(entry, where.node_id(), host));
  } else {
    why = absl::StrFormat("rank %d on node %s is no longer a straggler: %.2fx its peers' median since step %d",
                          global_rank, host, change->ratio, change->since_step);
  }
  absl::Status s = CommitLocked(entry, entry.record, {MakeEvent(entry, kind, job.state(), why, global_rank,
                                                                 where.node_id())});
  if (!s.ok()) {
    spdlog::error("job {}: straggler event not stored: {}", job.id(), s.ToString());
    return;
  }
  spdlog::warn("job {}: {}", job.id(), why);
  if (entry.drain.has_value() && entry.drain->straggler && entry.drain->sent == absl::InfinitePast()) {
    entry.drain->sent = clock_->Now();
    SendCheckpointNowLocked(entry, absl::StrCat("rank ", global_rank, " on node ", host, " is a straggler"));
  }
}

std::string JobLifecycle::StragglerMoveLocked(Entry& entry, const std::string& node_id, const std::string& host) {
  const v1::Job& job = entry.record.job;
  const absl::Time now = clock_->Now();
  if (!job.spec().restart().move_stragglers()) return "not moved (restart.move_stragglers is off)";
  if (entry.drain.has_value() || entry.preempt.has_value()) {
    return "not moved: a drain or a preemption is moving the job already";
  }
  if (now < entry.straggler_avoid_until) {
    return absl::StrCat("stays: it moved off a straggler's node less than ",
                        absl::FormatDuration(options_.stragglers.move_window), " ago (one move per window)");
  }
  int elsewhere = 0;
  for (const NodeCapacity& n : nodes_->SchedulableCapacity()) elsewhere += n.node_id != node_id ? 1 : 0;
  if (elsewhere < job.spec().resources().nodes()) {
    return absl::StrCat("stays: no other place to go (it needs ", job.spec().resources().nodes(),
                        " node(s); ", elsewhere, " other schedulable)");
  }
  entry.straggler_node = node_id;
  entry.straggler_avoid_until = now + options_.stragglers.move_window;
  entry.drain = Entry::DrainWait{node_id, host, now, absl::InfinitePast()};
  entry.drain->straggler = true;
  return absl::StrCat("moving the job off ", host, " (restart.move_stragglers): its ranks were asked for a ",
                      "checkpoint now; it moves once it is written, and keeps off ", host, " for ",
                      absl::FormatDuration(options_.stragglers.move_window));
}

void JobLifecycle::ContinueStragglerMoves() {
  const absl::Time now = clock_->Now();
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    Entry& entry = *found;
    std::lock_guard<std::mutex> lock(entry.mu);
    if (!entry.drain.has_value() || !entry.drain->straggler || !ActiveState(entry.record.job.state())) continue;
    Entry::DrainWait& move = *entry.drain;
    absl::Status s;
    if (move.saved_step >= 0) {  // the commit came but its move was not stored
      s = MoveOffDrainedLocked(entry, move.node_id, move.hostname,
                               absl::StrCat("checkpoint at step ", move.saved_step, " written"));
    } else if (now - move.requested >= options_.drain_checkpoint_timeout) {
      s = MoveOffDrainedLocked(entry, move.node_id, move.hostname,
                               absl::StrCat("no checkpoint within ",
                                            absl::FormatDuration(options_.drain_checkpoint_timeout),
                                            " of the request; moved from its newest checkpoint"));
    } else if (now - move.sent >= kMoveResend) {
      move.sent = now;
      SendCheckpointNowLocked(entry, absl::StrCat("node ", move.hostname, " runs a straggler"));
    }
    if (!s.ok()) spdlog::error("job {}: straggler move not applied (next tick): {}", entry.record.job.id(), s.ToString());
  }
}

std::set<std::string> JobLifecycle::StragglerAvoidedLocked(const Entry& entry) const {
  if (entry.straggler_node.empty() || clock_->Now() >= entry.straggler_avoid_until) return {};
  return {entry.straggler_node};
}

}  // namespace ringmaster::coordinator
