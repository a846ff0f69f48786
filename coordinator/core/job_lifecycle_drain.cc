// JobLifecycle: moving jobs off a drained node (job_lifecycle.h, "drains"),
// and quarantining nodes where many jobs failed.
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/core/job_lifecycle.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

// CheckpointNow orders are sent again this often while a drain waits (a
// worker that reconnected meanwhile missed them).
constexpr absl::Duration kDrainResend = absl::Seconds(30);

bool PlacedOn(const v1::Placement& placement, const std::string& node_id) {
  for (const v1::RankAssignment& r : placement.ranks()) {
    if (r.node_id() == node_id) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> JobLifecycle::DrainNode(const std::string& node_id, const std::string& hostname) {
  std::vector<std::string> remaining;
  const absl::Time now = clock_->Now();
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    Entry& entry = *found;
    std::lock_guard<std::mutex> lock(entry.mu);
    const v1::Job& job = entry.record.job;
    if (!ActiveState(job.state()) || !PlacedOn(job.placement(), node_id)) continue;
    const std::string job_id = job.id();
    absl::Status s;
    if (job.state() != v1::JOB_STATE_RUNNING) {
      s = MoveOffDrainedLocked(entry, node_id, hostname,
                               absl::StrCat("generation ", job.generation(), " had not started training"));
    } else if (!ReportsProgressLocked(entry)) {
      s = MoveOffDrainedLocked(entry, node_id, hostname,
                               "the program reports no progress, so it cannot be asked for a checkpoint: "
                               "stopped (SIGTERM, then SIGKILL after the grace period)");
    } else if (!entry.drain.has_value() || entry.drain->node_id != node_id) {
      if (entry.drain.has_value()) {  // another node's drain asked already: its checkpoint serves both
        remaining.push_back(job_id);
        continue;
      }
      entry.drain = Entry::DrainWait{node_id, hostname, now, absl::InfinitePast()};
      const std::string why = absl::StrCat("node ", hostname, " is being drained: the ranks were asked for a ",
                                           "checkpoint now; the job moves once it is written");
      s = CommitLocked(entry, entry.record, {MakeEvent(entry, v1::JOB_EVENT_KIND_DRAIN_REQUESTED, job.state(), why,
                                                        -1, node_id)});
      if (s.ok()) SendCheckpointNowLocked(entry);
    } else if (entry.drain->saved_step >= 0) {
      s = MoveOffDrainedLocked(entry, node_id, hostname,
                               absl::StrCat("checkpoint at step ", entry.drain->saved_step, " written"));
    } else if (now - entry.drain->requested >= options_.drain_checkpoint_timeout) {
      s = MoveOffDrainedLocked(entry, node_id, hostname,
                               absl::StrCat("no checkpoint within ",
                                                   absl::FormatDuration(options_.drain_checkpoint_timeout),
                                                   " of the request; moved from its newest checkpoint"));
    } else if (now - entry.drain->sent >= kDrainResend) {
      SendCheckpointNowLocked(entry);
    }
    if (!s.ok()) spdlog::error("job {}: drain of node {} not applied (retrying next tick): {}", job_id, hostname,
                               s.ToString());
    if (ActiveState(entry.record.job.state())) remaining.push_back(job_id);
  }
  return remaining;
}

absl::Status JobLifecycle::MoveOffDrainedLocked(Entry& entry, const std::string& node_id, const std::string& hostname,
                                                const std::string& why) {
  GenerationFailure move;
  move.kind = v1::JOB_EVENT_KIND_NODE_DRAINED;
  const bool straggler = entry.drain.has_value() && entry.drain->straggler;
  move.reason = absl::StrCat("moved off node ", hostname.empty() ? node_id : hostname,
                             straggler ? ", where a rank is a straggler: " : ", which is being drained: ", why);
  move.node_id = node_id;
  move.dump_state = false;
  return FailGenerationLocked(entry, move);
}

void JobLifecycle::QuarantineIfDueLocked(const Entry& entry, const std::string& node_id, std::string* why) {
  std::optional<std::string> reason =
      quarantine_.Record(node_id, entry.record.job.id(), clock_->Now(), options_.quarantine);
  if (!reason.has_value()) return;
  absl::StatusOr<v1::NodeInfo> info = nodes_->GetNode(node_id);
  if (!info.ok() || !info->cordoned_by().empty()) return;  // a cordon in place already keeps jobs off
  absl::StatusOr<v1::NodeInfo> cordoned = nodes_->SetCordon(node_id, kCordonedByCoordinator, *reason);
  if (!cordoned.ok()) {
    quarantine_.Forget(node_id);  // counted again from the next failure
    spdlog::error("node {}: quarantine not stored: {}", info->hostname(), cordoned.status().ToString());
    return;
  }
  spdlog::warn("node {} ({}) is cordoned: {}", info->hostname(), node_id, *reason);
  absl::StrAppend(why, "; node ", info->hostname(), " is ", *reason);
}

void JobLifecycle::SendCheckpointNowLocked(Entry& entry) {
  entry.drain->sent = clock_->Now();
  SendCheckpointNowLocked(entry, absl::StrCat("node ", entry.drain->hostname, " is being drained"));
}

void JobLifecycle::SendCheckpointNowLocked(Entry& entry, const std::string& why) {
  const v1::Job& job = entry.record.job;
  std::string last;
  for (const v1::RankAssignment& r : job.placement().ranks()) {
    if (r.node_id() == last) continue;
    last = r.node_id();
    const CheckpointOrder order{r.node_id(), job.id(), job.generation(), why};
    for (JobListener* l : listeners_) l->OnCheckpointNow(order);
  }
}

}  // namespace ringmaster::coordinator
