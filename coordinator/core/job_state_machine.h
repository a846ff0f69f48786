#ifndef RINGMASTER_COORDINATOR_JOB_STATE_MACHINE_H_
#define RINGMASTER_COORDINATOR_JOB_STATE_MACHINE_H_

// The job state machine as a table: which transitions are legal, which
// states are terminal, and the names used in events and messages. Pure
// functions; thread-safe.
//
//   QUEUED     -> PLACED | CANCELLED | FAILED
//   PLACED     -> STARTING | RUNNING* | RESTARTING | CANCELLED | FAILED
//   STARTING   -> RUNNING | RESTARTING | SUCCEEDED* | CANCELLED | FAILED
//   RUNNING    -> RESTARTING | SUCCEEDED | CANCELLED | FAILED
//   RESTARTING -> STARTING | CANCELLED | FAILED
//   SUCCEEDED, FAILED, CANCELLED: terminal, no way out.
//
// (*) PLACED -> RUNNING only when the STARTING record could not be written
// before the ranks joined; STARTING -> SUCCEEDED when every rank exits 0
// before the generation was seen running (a very short job). A restarted
// generation goes RESTARTING -> STARTING directly: its placement is recorded
// with that transition.

#include <string>

#include "absl/status/status.h"
#include "proto/job.pb.h"

namespace ringmaster::coordinator {

bool IsTerminal(v1::JobState state);
bool IsLegalTransition(v1::JobState from, v1::JobState to);
// OK, or FAILED_PRECONDITION "job j-1 is SUCCEEDED; it cannot become RUNNING".
absl::Status CheckTransition(const std::string& job_id, v1::JobState from, v1::JobState to);
// "QUEUED", "RUNNING", ... (the enum name without its prefix).
std::string StateName(v1::JobState state);
// Job.reason for an event kind: "RankExited", "NodeLost", ...; empty for
// kinds that are not causes.
std::string ReasonCode(v1::JobEventKind kind);
// Whether a restart whose cause is `reason` (a Job.reason, ReasonCode) uses
// up one of restart.max_restarts. A coordinator restart or a damaged
// checkpoint is not the job's doing: those restarts are free.
bool RestartCounts(const std::string& reason);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_JOB_STATE_MACHINE_H_
