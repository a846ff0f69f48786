// JobController: shared helpers and the JobService side. Scheduling and the
// lifecycle of generations are in job_controller_lifecycle.cc; recovery and
// nodes in job_controller_nodes.cc.
#include "coordinator/core/job_controller.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/path_within.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "coordinator/core/job_state_machine.h"
#include "common/proto_time.h"

namespace ringmaster::coordinator {
namespace {

constexpr size_t kMaxRequestIdLength = 128;
constexpr int32_t kDefaultPageSize = 100;
constexpr int32_t kMaxPageSize = 1000;

}  // namespace

JobController::JobController(const Clock* clock, Store* store, NodeRegistry* nodes, CheckpointRegistry* checkpoints,
                             Rendezvous* rendezvous, JobControllerOptions options)
    : clock_(clock),
      store_(store),
      nodes_(nodes),
      checkpoints_(checkpoints),
      rendezvous_(rendezvous),
      options_(std::move(options)) {}

void JobController::AddListener(JobListener* listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(listener);
}

// ---- helpers ----

JobController::JobEntry* JobController::FindLocked(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobController::JobEntry* JobController::FindLocked(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

v1::Job JobController::SnapshotLocked(const JobEntry& entry) const {
  v1::Job job = entry.record.job;
  auto rank0 = entry.progress.find(0);
  if (rank0 != entry.progress.end()) *job.mutable_progress() = rank0->second;
  absl::StatusOr<v1::CheckpointInfo> latest = checkpoints_->Latest(job.id());
  if (latest.ok()) *job.mutable_last_checkpoint() = *std::move(latest);
  return job;
}

void JobController::NotifyJobLocked(const JobEntry& entry, const std::vector<v1::JobEvent>& events) {
  if (listeners_.empty()) return;
  const v1::Job job = SnapshotLocked(entry);
  for (JobListener* l : listeners_) l->OnJobChanged(job, events);
}

void JobController::NotifyStopLocked(const std::vector<StopOrder>& orders) {
  for (const StopOrder& order : orders) {
    for (JobListener* l : listeners_) l->OnStopRanks(order);
  }
}

v1::JobEvent JobController::MakeEvent(const JobEntry& entry, v1::JobEventKind kind, v1::JobState to,
                                      const std::string& reason, int32_t rank, const std::string& node_id) const {
  v1::JobEvent e;
  e.set_job_id(entry.record.job.id());
  *e.mutable_time() = ToProtoTime(clock_->Now());
  e.set_from_state(entry.record.job.state());
  e.set_to_state(to);
  e.set_kind(kind);
  e.set_reason(reason);
  e.set_generation(entry.record.job.generation());
  e.set_rank(rank);
  e.set_node_id(node_id);
  return e;
}

absl::Status JobController::CommitLocked(JobEntry& entry, JobRecord next, std::vector<v1::JobEvent> events,
                                         const v1::Placement* placement) {
  for (const v1::JobEvent& e : events) {
    if (e.from_state() != e.to_state()) RETURN_IF_ERROR(CheckTransition(next.job.id(), e.from_state(), e.to_state()));
  }
  if (placement != nullptr) *next.job.mutable_placement() = *placement;
  ASSIGN_OR_RETURN(std::vector<v1::JobEvent> stored, store_->UpdateJob(next, std::move(events), placement));
  entry.record = std::move(next);
  NotifyJobLocked(entry, stored);
  return absl::OkStatus();
}

// ---- JobService ----

absl::Status JobController::CheckCheckpointRoot(const std::string& directory) const {
  if (directory.empty()) return absl::OkStatus();
  std::vector<std::string> roots = options_.allowed_checkpoint_roots;
  roots.push_back(options_.checkpoint_root);
  if (PathWithinAny(directory, roots)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint.directory: ", directory, " is not within a checkpoint root this coordinator allows (",
      absl::StrJoin(roots, ", "),
      "); leave it out to use the coordinator's own, or ask the operator to allow it "
      "(ringmaster-coordinator --checkpoint-allowed-roots)"));
}

std::string JobController::CheckpointDirLocked(const v1::Job& job) const {
  const std::string& root =
      job.spec().checkpoint().directory().empty() ? options_.checkpoint_root : job.spec().checkpoint().directory();
  std::filesystem::path base = std::filesystem::path(root).lexically_normal();
  if (!base.has_filename()) base = base.parent_path();  // "/a/b/" -> "/a/b"
  return absl::StrCat(base.string(), "/", job.id(), "/gen-", job.generation());
}

absl::StatusOr<v1::Job> JobController::Submit(v1::JobSpec spec, const SubmitOptions& options) {
  if (options.request_id.size() > kMaxRequestIdLength) {
    return absl::InvalidArgumentError(absl::StrCat("request_id: must be at most ", kMaxRequestIdLength,
                                                   " characters, got ", options.request_id.size()));
  }
  ApplyDefaults(&spec);
  RETURN_IF_ERROR(ValidateJobSpec(spec));
  RETURN_IF_ERROR(CheckCheckpointRoot(spec.checkpoint().directory()));
  if (options.validate_only) {
    v1::Job job;
    *job.mutable_spec() = std::move(spec);
    return job;
  }
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord record;
  record.user = options.user;
  record.job.set_owner(options.user);
  record.request_id = options.request_id;
  record.job.set_state(v1::JOB_STATE_QUEUED);
  *record.job.mutable_spec() = std::move(spec);
  *record.job.mutable_submit_time() = ToProtoTime(clock_->Now());
  record.job.set_message("queued");
  JobEntry scratch;
  scratch.record.job.set_state(v1::JOB_STATE_UNSPECIFIED);
  v1::JobEvent submitted =
      MakeEvent(scratch, v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_QUEUED,
                options.user.empty() ? "submitted" : absl::StrCat("submitted by ", options.user));
  bool created = false;
  ASSIGN_OR_RETURN(JobRecord stored, store_->CreateJob(record, submitted, &created));
  if (!created) {
    const JobEntry* existing = FindLocked(stored.job.id());
    if (existing == nullptr) return absl::InternalError(absl::StrCat("job ", stored.job.id(), " is not loaded"));
    return SnapshotLocked(*existing);
  }
  JobEntry& entry = jobs_[stored.job.id()];
  entry.record = std::move(stored);
  if (std::optional<std::string> why = Unschedulable(RequestFor(entry.record), nodes_->SchedulableCapacity())) {
    entry.record.job.set_unschedulable(*why);
  }
  submitted.set_job_id(entry.record.job.id());
  submitted.set_sequence(1);
  NotifyJobLocked(entry, {submitted});
  return SnapshotLocked(entry);
}

absl::StatusOr<v1::Job> JobController::GetJob(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const JobEntry* entry = FindLocked(job_id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  return SnapshotLocked(*entry);
}

absl::StatusOr<std::vector<v1::JobEvent>> JobController::GetEvents(const std::string& job_id,
                                                                  int64_t after_sequence) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (FindLocked(job_id) == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  }
  return store_->LoadEvents(job_id, after_sequence);
}

absl::Status JobController::SnapshotJob(
    const std::string& job_id, int64_t after_sequence,
    const std::function<void(const v1::Job&, const std::vector<v1::JobEvent>&)>& at_snapshot) const {
  std::lock_guard<std::mutex> lock(mu_);
  const JobEntry* entry = FindLocked(job_id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  // Lock order JobController -> Store: events are written under our lock too.
  ASSIGN_OR_RETURN(std::vector<v1::JobEvent> events, store_->LoadEvents(job_id, after_sequence));
  at_snapshot(SnapshotLocked(*entry), events);
  return absl::OkStatus();
}

absl::StatusOr<ListJobsPage> JobController::ListJobs(const ListJobsQuery& query) const {
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
  std::vector<const JobEntry*> matching;
  for (const auto& [id, entry] : jobs_) {
    const v1::Job& job = entry.record.job;
    if (entry.record.submit_seq >= before_seq) continue;
    if (!query.states.empty() &&
        std::find(query.states.begin(), query.states.end(), job.state()) == query.states.end()) {
      continue;
    }
    bool labels_match = true;
    for (const auto& [k, v] : query.label_selector) {
      auto it = job.spec().labels().find(k);
      labels_match &= it != job.spec().labels().end() && it->second == v;
    }
    if (labels_match) matching.push_back(&entry);
  }
  std::sort(matching.begin(), matching.end(),
            [](const JobEntry* a, const JobEntry* b) { return a->record.submit_seq > b->record.submit_seq; });
  ListJobsPage out;
  for (size_t i = 0; i < matching.size() && i < page; ++i) out.jobs.push_back(SnapshotLocked(*matching[i]));
  if (matching.size() > page) out.next_page_token = absl::StrCat(matching[page - 1]->record.submit_seq);
  return out;
}

absl::StatusOr<CancelResult> JobController::Cancel(const std::string& job_id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  JobEntry* entry = FindLocked(job_id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  CancelResult result;
  if (IsTerminal(entry->record.job.state())) {
    result.job = SnapshotLocked(*entry);
    return result;
  }
  const std::string why = reason.empty() ? "cancelled" : absl::StrCat("cancelled: ", reason);
  std::vector<StopOrder> stop = StopOrdersLocked(*entry, why, "");
  JobRecord next = entry->record;
  next.job.set_state(v1::JOB_STATE_CANCELLED);
  next.job.set_reason(ReasonCode(v1::JOB_EVENT_KIND_CANCELLED));
  next.job.set_message(why);
  *next.job.mutable_end_time() = ToProtoTime(clock_->Now());
  RETURN_IF_ERROR(CommitLocked(*entry, std::move(next),
                               {MakeEvent(*entry, v1::JOB_EVENT_KIND_CANCELLED, v1::JOB_STATE_CANCELLED, why)}));
  rendezvous_->EndGeneration(job_id, entry->record.job.generation());
  NotifyStopLocked(stop);
  result.job = SnapshotLocked(*entry);
  result.stop = std::move(stop);
  return result;
}

absl::StatusOr<std::map<int32_t, v1::StepMetrics>> JobController::GetRankProgress(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const JobEntry* entry = FindLocked(job_id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  return entry->progress;
}

absl::StatusOr<std::vector<v1::CheckpointInfo>> JobController::ListCheckpoints(const std::string& job_id,
                                                                              bool include_incomplete) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (FindLocked(job_id) == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  }
  return checkpoints_->List(job_id, include_incomplete);
}

absl::StatusOr<v1::CheckpointInfo> JobController::LatestCheckpoint(const std::string& job_id) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (FindLocked(job_id) == nullptr) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  }
  return checkpoints_->Latest(job_id);
}

}  // namespace ringmaster::coordinator
