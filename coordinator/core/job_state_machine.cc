#include "coordinator/core/job_state_machine.h"

#include "absl/strings/str_cat.h"

namespace ringmaster::coordinator {

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED;
}

bool IsLegalTransition(v1::JobState from, v1::JobState to) {
  if (IsTerminal(from) || from == to) return false;
  if (to == v1::JOB_STATE_CANCELLED || to == v1::JOB_STATE_FAILED) {
    return from != v1::JOB_STATE_UNSPECIFIED;
  }
  switch (from) {
    case v1::JOB_STATE_UNSPECIFIED:
      return to == v1::JOB_STATE_QUEUED;
    case v1::JOB_STATE_QUEUED:
      return to == v1::JOB_STATE_PLACED;
    case v1::JOB_STATE_PLACED:
      return to == v1::JOB_STATE_STARTING || to == v1::JOB_STATE_RUNNING || to == v1::JOB_STATE_RESTARTING;
    case v1::JOB_STATE_STARTING:
      return to == v1::JOB_STATE_RUNNING || to == v1::JOB_STATE_RESTARTING || to == v1::JOB_STATE_SUCCEEDED;
    case v1::JOB_STATE_RUNNING:
      return to == v1::JOB_STATE_RESTARTING || to == v1::JOB_STATE_SUCCEEDED;
    case v1::JOB_STATE_RESTARTING:
      return to == v1::JOB_STATE_STARTING;
    default:
      return false;
  }
}

absl::Status CheckTransition(const std::string& job_id, v1::JobState from, v1::JobState to) {
  if (IsLegalTransition(from, to)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job_id, " is ", StateName(from), "; it cannot become ", StateName(to)));
}

std::string StateName(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  constexpr absl::string_view kPrefix = "JOB_STATE_";
  if (name.rfind(kPrefix.data(), 0) == 0) name = name.substr(kPrefix.size());
  return name.empty() ? absl::StrCat(static_cast<int>(state)) : name;
}

std::string ReasonCode(v1::JobEventKind kind) {
  switch (kind) {
    case v1::JOB_EVENT_KIND_RANK_EXITED:
      return "RankExited";
    case v1::JOB_EVENT_KIND_NODE_LOST:
      return "NodeLost";
    case v1::JOB_EVENT_KIND_PROGRESS_TIMEOUT:
      return "ProgressTimeout";
    case v1::JOB_EVENT_KIND_RENDEZVOUS_TIMEOUT:
      return "RendezvousTimeout";
    case v1::JOB_EVENT_KIND_CANCELLED:
      return "Cancelled";
    case v1::JOB_EVENT_KIND_SUCCEEDED:
      return "Succeeded";
    case v1::JOB_EVENT_KIND_RECOVERED:
      return "CoordinatorRestarted";
    case v1::JOB_EVENT_KIND_FAILED:
      return "Failed";
    case v1::JOB_EVENT_KIND_CHECKPOINT_DAMAGED:
      return "CheckpointDamaged";
    case v1::JOB_EVENT_KIND_NODE_DRAINED:
      return "NodeDrained";
    case v1::JOB_EVENT_KIND_PREEMPTED:
      return "Preempted";
    default:
      return "";
  }
}

bool RestartCounts(const std::string& reason) {
  return reason != ReasonCode(v1::JOB_EVENT_KIND_RECOVERED) &&
         reason != ReasonCode(v1::JOB_EVENT_KIND_CHECKPOINT_DAMAGED) &&
         reason != ReasonCode(v1::JOB_EVENT_KIND_NODE_DRAINED) && reason != ReasonCode(v1::JOB_EVENT_KIND_PREEMPTED);
}

}  // namespace ringmaster::coordinator
