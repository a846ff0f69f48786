#ifndef RINGMASTER_COORDINATOR_CORE_JOB_SUMMARY_H_
#define RINGMASTER_COORDINATOR_CORE_JOB_SUMMARY_H_

// What answers about jobs carry, bounded whatever is stored: the JobSummary
// that ListJobs lists (proto/job.proto), and a whole Job cut to fit an
// answer when an older coordinator stored it beyond the spec's limits
// (common/spec_limits.h). New jobs are within the limits at Submit, so they
// are never cut; the bounds here are what keeps one old or damaged record
// from breaking an answer for everyone. Pure functions; thread-safe.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "proto/job.pb.h"

namespace ringmaster::coordinator {

// JobSummary.message and .unschedulable: at most this many bytes.
inline constexpr size_t kMaxSummaryTextBytes = 1024;
// A summary is never larger than this, serialized (64 labels and 32 node
// selectors at their limits, the texts above, the rest fixed-size).
inline constexpr size_t kMaxJobSummaryBytes = size_t{48} << 10;
// Job.message and JobEvent.reason as the coordinator records them: longer
// texts (a rank's report, a cancel reason) are cut to this many bytes.
inline constexpr size_t kMaxJobTextBytes = 2048;
// A whole Job in an answer (GetJob, CancelJob, WatchJob): a job within the
// spec's limits is far below it (spec and submitted spec of 256 KiB each,
// the --set overrides at most 1 MiB).
inline constexpr size_t kMaxJobAnswerBytes = size_t{4} << 20;

// `text` if it has at most `max_bytes` bytes; else its longest prefix that
// ends on a character and leaves room for " [... cut]", with that marker.
std::string CutText(absl::string_view text, size_t max_bytes);

// What ListJobs says of `job`; at most kMaxJobSummaryBytes. Labels and
// node selectors beyond the spec's limits (a job stored before them) are
// left out, the first ones by key kept, and the summary says so (abridged).
// queue_position is the caller's (it depends on the other jobs).
v1::JobSummary SummarizeJob(const v1::Job& job);

// Cuts `job` to at most `max_bytes` serialized when it is larger, in this
// order until it fits: Job.submitted dropped; the spec's labels,
// node_selector and env cut to their limits (common/spec_limits.h); the
// spec reduced to its summary (name, resources, priority, labels). Sets
// Job.abridged when it cut anything; returns whether it did.
bool AbridgeJob(v1::Job* job, size_t max_bytes = kMaxJobAnswerBytes);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_JOB_SUMMARY_H_
