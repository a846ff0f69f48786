// JobLifecycle: preemption, checkpoint first (job_lifecycle.h, "preemption").
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/core/job_lifecycle.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

// CheckpointNow orders are sent again this often while a preemption waits
// (a worker that reconnected meanwhile missed them).
constexpr absl::Duration kPreemptResend = absl::Seconds(30);

}  // namespace

std::string QueueOf(const v1::JobSpec& spec) { return spec.queue().empty() ? "default" : spec.queue(); }

absl::Status JobLifecycle::Preempt(const std::string& job_id, const std::string& reason) {
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return JobNotFoundError(job_id);
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  const v1::Job& job = entry.record.job;
  if (!ActiveState(job.state()) || entry.preempt.has_value()) return absl::OkStatus();
  entry.preempt = Entry::PreemptWait{reason, clock_->Now(), absl::InfinitePast()};
  if (job.state() != v1::JOB_STATE_RUNNING) {
    return PreemptNowLocked(entry, absl::StrCat("generation ", job.generation(), " had not started training"));
  }
  if (!ReportsProgressLocked(entry)) {
    return PreemptNowLocked(entry, "the program reports no progress, so it cannot be asked for a checkpoint: "
                                   "stopped (SIGTERM, then SIGKILL after the grace period)");
  }
  const std::string why = absl::StrCat(reason, ": the ranks were asked for a checkpoint now; the job gives its ",
                                       "slots back once it is written");
  RETURN_IF_ERROR(CommitLocked(entry, entry.record,
                               {MakeEvent(entry, v1::JOB_EVENT_KIND_PREEMPTION_REQUESTED, job.state(), why)}));
  entry.preempt->sent = clock_->Now();
  SendCheckpointNowLocked(entry, absl::StrCat("preempted: ", reason));
  return absl::OkStatus();
}

void JobLifecycle::ContinuePreemptions() {
  const absl::Time now = clock_->Now();
  for (const std::shared_ptr<Entry>& found : AllEntries()) {
    Entry& entry = *found;
    std::lock_guard<std::mutex> lock(entry.mu);
    if (!entry.preempt.has_value() || !ActiveState(entry.record.job.state())) continue;
    absl::Status s;
    if (entry.preempt->saved_step >= 0) {  // the move after the commit failed: again
      s = PreemptNowLocked(entry, absl::StrCat("checkpoint at step ", entry.preempt->saved_step, " written"));
    } else if (now - entry.preempt->requested >= options_.preemption_grace) {
      s = PreemptNowLocked(entry, absl::StrCat("no checkpoint within the grace period of ",
                                               absl::FormatDuration(options_.preemption_grace),
                                               "; it resumes from its newest committed checkpoint"));
    } else if (now - entry.preempt->sent >= kPreemptResend) {
      entry.preempt->sent = now;
      SendCheckpointNowLocked(entry, absl::StrCat("preempted: ", entry.preempt->reason));
    }
    if (!s.ok()) {
      spdlog::error("job {}: preemption not applied (retrying next tick): {}", entry.record.job.id(), s.ToString());
    }
  }
}

absl::Status JobLifecycle::PreemptNowLocked(Entry& entry, const std::string& how) {
  GenerationFailure stop;
  stop.kind = v1::JOB_EVENT_KIND_PREEMPTED;
  stop.reason = absl::StrCat("preempted (", entry.preempt->reason, "): ", how);
  stop.dump_state = false;
  return FailGenerationLocked(entry, stop);
}

std::vector<RunningJob> JobLifecycle::RunningJobs(const std::vector<HeldGeneration>& held) const {
  std::vector<RunningJob> running;
  for (const HeldGeneration& h : held) {
    std::shared_ptr<Entry> found = Find(h.job_id);
    RunningJob r;
    r.job_id = h.job_id;
    r.nodes = h.nodes;
    r.preempting = true;  // a job the coordinator no longer knows: its ranks are on their way out
    r.kind = !h.nodes.empty() && h.nodes.front().gpu_uuids.empty() ? SlotKind::kCpu : SlotKind::kGpu;
    if (found != nullptr) {
      std::lock_guard<std::mutex> lock(found->mu);
      const v1::Job& job = found->record.job;
      r.queue = QueueOf(job.spec());
      r.priority = job.spec().priority();
      r.start_seq = found->record.submit_seq;
      // Slots of a generation that is over come free as its ranks exit.
      r.preempting = !ActiveState(job.state()) || job.generation() != h.generation || found->preempt.has_value();
    }
    running.push_back(std::move(r));
  }
  return running;
}

}  // namespace ringmaster::coordinator
