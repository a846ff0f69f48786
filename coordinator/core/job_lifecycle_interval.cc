// JobLifecycle: the checkpoint interval in force (checkpoint.interval auto:
// common/checkpoint_interval.h).
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checkpoint_interval.h"
#include "coordinator/core/goodput.h"
#include "coordinator/core/job_lifecycle.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {

void JobLifecycle::ChooseCheckpointIntervalLocked(Entry& entry) {
  const v1::Job& job = entry.record.job;
  const CheckpointIntervalPolicy& policy = options_.checkpoint_interval;
  const absl::Time now = clock_->Now();
  std::set<std::string> nodes;
  for (const v1::RankAssignment& r : job.placement().ranks()) nodes.insert(r.node_id());
  const v1::GoodputBreakdown time = GoodputAt(entry.goodput, now);
  FailureHistory history;
  history.job_failures = job.restarts();  // the failures that restarted it (drains, preemptions do not count)
  history.job_running_seconds = time.training_seconds() + time.checkpoint_stall_seconds() + time.recomputed_seconds();
  history.window_seconds = absl::ToDoubleSeconds(policy.failure_window);
  history.node_failures = failure_log_.CountSince(nodes, now - policy.failure_window);
  history.prior_seconds = absl::ToDoubleSeconds(policy.mtbf_prior);
  // The stall measured by an earlier generation, if any: this one's first
  // checkpoint need not wait for the lower bound to measure it.
  const double last_stall = entry.checkpoint_interval.stall_seconds();
  entry.auto_interval = MakeAutoIntervalInputs(history, absl::ToDoubleSeconds(policy.min),
                                               absl::ToDoubleSeconds(policy.max), last_stall);
  v1::CheckpointInterval chosen = IntervalInForce(job.spec().checkpoint(), entry.auto_interval);
  chosen.set_stall_seconds(last_stall);
  entry.checkpoint_interval = chosen;
  views_.Publish(SnapshotLocked(entry), entry.record.submit_seq);  // readers see it with the placement
}

void JobLifecycle::AnnounceSteppingIfDueLocked(Entry& entry) {
  const v1::Job& job = entry.record.job;
  if (entry.stepping || job.state() != v1::JOB_STATE_RUNNING ||
      static_cast<int64_t>(entry.progress.size()) < job.placement().world_size()) {
    return;
  }
  entry.stepping = true;
  std::string why = absl::StrCat("all ", job.placement().world_size(), " ranks are stepping");
  if (entry.failure_detected != absl::InfinitePast()) {
    absl::StrAppend(&why, absl::StrFormat(" %.1fs after the previous generation stopped",
                                          absl::ToDoubleSeconds(clock_->Now() - entry.failure_detected)));
    entry.failure_detected = absl::InfinitePast();
  }
  v1::JobEvent event = MakeEvent(entry, v1::JOB_EVENT_KIND_STEPPING, v1::JOB_STATE_RUNNING, why);
  if (absl::Status s = CommitLocked(entry, entry.record, {event}); !s.ok()) {
    spdlog::error("job {}: STEPPING not stored: {}", job.id(), s.ToString());
  }
}

}  // namespace ringmaster::coordinator
