#include "coordinator/core/job_views.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "coordinator/core/goodput.h"
#include "coordinator/core/job_state_machine.h"
#include "coordinator/core/job_summary.h"

namespace ringmaster::coordinator {
namespace {

constexpr int32_t kDefaultPageSize = 100;
constexpr int32_t kMaxPageSize = 1000;

bool Matches(const v1::Job& job, const ListJobsQuery& query) {
  if (!query.states.empty() &&
      std::find(query.states.begin(), query.states.end(), job.state()) == query.states.end()) {
    return false;
  }
  for (const auto& [k, v] : query.label_selector) {
    auto it = job.spec().labels().find(k);
    if (it == job.spec().labels().end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

absl::Status JobNotFoundError(const std::string& job_id) {
  return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
}

void JobViews::Publish(const v1::Job& job, int64_t submit_seq) {
  v1::JobSummary summary = SummarizeJob(job);
  std::lock_guard<std::mutex> lock(mu_);
  View& view = views_[job.id()];
  view.submit_seq = submit_seq;
  view.job = job;
  view.summary = std::move(summary);
}

void JobViews::PublishProgress(const std::string& job_id, int32_t global_rank, const v1::StepMetrics& metrics) {
  std::lock_guard<std::mutex> lock(mu_);
  View& view = views_[job_id];
  view.progress[global_rank] = metrics;
  if (global_rank == 0) {
    *view.job.mutable_progress() = metrics;
    *view.summary.mutable_progress() = metrics;
  }
}

void JobViews::ClearProgress(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  views_[job_id].progress.clear();
}

void JobViews::Erase(const std::vector<std::string>& job_ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& id : job_ids) views_.erase(id);
}

absl::StatusOr<v1::Job> JobViews::GetJob(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = views_.find(job_id);
  if (it == views_.end()) return JobNotFoundError(job_id);
  v1::Job job = it->second.job;
  if (clock_ != nullptr) *job.mutable_goodput() = GoodputAt(job.goodput(), clock_->Now());
  return job;
}

absl::StatusOr<std::map<int32_t, v1::StepMetrics>> JobViews::GetRankProgress(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = views_.find(job_id);
  if (it == views_.end()) return JobNotFoundError(job_id);
  return it->second.progress;
}

std::vector<FinishedJob> JobViews::Finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FinishedJob> finished;
  for (const auto& [id, view] : views_) {
    if (IsTerminal(view.job.state())) finished.push_back({id, FromProtoTime(view.job.end_time()), view.submit_seq});
  }
  return finished;
}

std::map<const JobViews::View*, int32_t> JobViews::QueuePositionsLocked() const {
  std::vector<const View*> waiting;
  for (const auto& [id, view] : views_) {
    const v1::JobState state = view.job.state();
    if (state == v1::JOB_STATE_QUEUED || state == v1::JOB_STATE_RESTARTING) waiting.push_back(&view);
  }
  std::sort(waiting.begin(), waiting.end(), [](const View* a, const View* b) {
    const int32_t pa = a->job.spec().priority(), pb = b->job.spec().priority();
    return pa != pb ? pa > pb : a->submit_seq < b->submit_seq;
  });
  std::map<const View*, int32_t> position;
  for (size_t i = 0; i < waiting.size(); ++i) position[waiting[i]] = static_cast<int32_t>(i + 1);
  return position;
}

absl::StatusOr<ListJobsPage> JobViews::ListJobs(const ListJobsQuery& query) const {
  if (query.page_size < 0 || query.page_size > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be in [0, ", kMaxPageSize, "], got ", query.page_size));
  }
  int64_t before_seq = INT64_MAX;
  if (!query.page_token.empty() && (!absl::SimpleAtoi(query.page_token, &before_seq) || before_seq < 1)) {
    return absl::InvalidArgumentError("page_token: not a token ListJobs returned");
  }
  const size_t page = query.page_size == 0 ? kDefaultPageSize : static_cast<size_t>(query.page_size);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<const View*> matching;
  for (const auto& [id, view] : views_) {
    if (view.submit_seq < before_seq && Matches(view.job, query)) matching.push_back(&view);
  }
  std::sort(matching.begin(), matching.end(),
            [](const View* a, const View* b) { return a->submit_seq > b->submit_seq; });
  const std::map<const View*, int32_t> position = QueuePositionsLocked();
  // Summaries up to page_size, and below kMaxListJobsPageBytes (at least one).
  ListJobsPage out;
  size_t bytes = 0, taken = 0;
  for (; taken < matching.size() && taken < page; ++taken) {
    v1::JobSummary summary = matching[taken]->summary;
    auto at = position.find(matching[taken]);
    if (at != position.end()) summary.set_queue_position(at->second);
    const size_t size = summary.ByteSizeLong() + 8;  // and its framing in the response
    if (!out.jobs.empty() && bytes + size > kMaxListJobsPageBytes) break;
    bytes += size;
    out.jobs.push_back(std::move(summary));
  }
  if (taken < matching.size()) out.next_page_token = absl::StrCat(matching[taken - 1]->submit_seq);
  return out;
}

}  // namespace ringmaster::coordinator
