#ifndef RINGMASTER_COORDINATOR_CORE_JOB_VIEWS_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_VIEWS_H_

// JobViews: what readers see of every job, published by JobLifecycle after
// each change of a job (the job, its summary, each rank's progress) and read
// by GetJob, ListJobs and GetRankProgress without waiting for any job's
// transition or store write. ListJobs pages here: newest submission first, by
// count and by kMaxListJobsPageBytes, each waiting job with its queue position.
//
// Threading: thread-safe. One mutex, a leaf: held only to copy in memory,
// never during I/O or a callback; summaries are computed before it is taken.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/core/job_retention.h"
#include "coordinator/core/job_types.h"
#include "proto/job.pb.h"

namespace ringmaster::coordinator {

// NOT_FOUND "job <id> not found": every answer about an unknown job.
absl::Status JobNotFoundError(const std::string& job_id);

class JobViews {
 public:
  // `clock` (not owned; nullptr: none) times GetJob's goodput: the job's
  // current phase counts up to the time of the answer.
  explicit JobViews(const Clock* clock = nullptr) : clock_(clock) {}

  // Makes `job` what readers see of it; `submit_seq` orders ListJobs. Keeps
  // the per-rank progress (PublishProgress).
  void Publish(const v1::Job& job, int64_t submit_seq);
  // One rank's latest step metrics; rank 0's are also the job's progress.
  void PublishProgress(const std::string& job_id, int32_t global_rank, const v1::StepMetrics& metrics);
  // A new generation's progress starts empty.
  void ClearProgress(const std::string& job_id);
  // Forgets deleted jobs (retention).
  void Erase(const std::vector<std::string>& job_ids);

  // NOT_FOUND for an unknown id. Its goodput is counted up to now.
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id) const;
  // Summaries, newest submission first, at most page_size (0: 100) and
  // kMaxListJobsPageBytes (at least one), filtered by state and labels; a
  // waiting job's (QUEUED or RESTARTING) carries its queue_position among
  // all waiting jobs, by priority then submission. INVALID_ARGUMENT for a
  // page_size outside [0, 1000] or a token this did not return.
  absl::StatusOr<ListJobsPage> ListJobs(const ListJobsQuery& query) const;
  // The latest step metrics of each rank of the current generation. NOT_FOUND.
  absl::StatusOr<std::map<int32_t, v1::StepMetrics>> GetRankProgress(const std::string& job_id) const;
  // Every job in a terminal state, for retention (SelectExpired).
  std::vector<FinishedJob> Finished() const;

 private:
  struct View {
    v1::Job job;             // with progress (rank 0's) and last_checkpoint
    v1::JobSummary summary;  // SummarizeJob(job), kept with it: what ListJobs copies
    int64_t submit_seq = 0;
    std::map<int32_t, v1::StepMetrics> progress;
  };
  // The waiting jobs' queue positions, from 1 (the scheduler's order:
  // priority, then submission; a restart keeps its place).
  std::map<const View*, int32_t> QueuePositionsLocked() const;

  const Clock* const clock_;
  mutable std::mutex mu_;
  std::map<std::string, View> views_;  // by job id; guarded by mu_
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_VIEWS_H_
