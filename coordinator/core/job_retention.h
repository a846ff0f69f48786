#ifndef RINGMASTER_COORDINATOR_CORE_JOB_RETENTION_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_RETENTION_H_

// Which finished jobs a JobRetention lets go: a pure function. JobLifecycle
// (ExpireFinished) deletes what it selects from the store, the checkpoint
// registry and memory.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/core/job_types.h"

namespace ringmaster::coordinator {

// A job in a terminal state, as retention sees it.
struct FinishedJob {
  std::string id;
  absl::Time ended;        // Job.end_time
  int64_t submit_seq = 0;  // breaks ties between jobs that ended together: the later submission is newer
};

// The ids of the jobs to delete: those that ended more than retention.max_age
// before `now` (max_age <= 0: no age limit), and those beyond the newest
// retention.max_count (< 0: no limit), newest by end time, then by
// submission. Returned newest first.
std::vector<std::string> SelectExpired(std::vector<FinishedJob> finished, const JobRetention& retention,
                                       absl::Time now);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_RETENTION_H_
