// JobLifecycle: shared helpers, recovery and the JobService side. The
// generations' lifecycle (start, running, failure, restart, success),
// progress, checkpoints and time are in job_lifecycle_generations.cc; what the
// dispatcher and the node reconciler ask of it, in job_lifecycle_nodes.cc.
#include "coordinator/core/job_lifecycle.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/checkpoint_layout.h"
#include "common/proto_time.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "coordinator/core/goodput.h"
#include "coordinator/core/job_admission.h"
#include "coordinator/core/job_retention.h"
#include "coordinator/core/job_state_machine.h"
#include "coordinator/core/job_summary.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

// CancelJobRequest.reason, recorded in the job's message and its event.
constexpr size_t kMaxCancelReasonBytes = 1024;

}  // namespace

bool ActiveState(v1::JobState s) {
  return s == v1::JOB_STATE_PLACED || s == v1::JOB_STATE_STARTING || s == v1::JOB_STATE_RUNNING;
}

JobLifecycle::JobLifecycle(const Clock* clock, Store* store, NodeRegistry* nodes, CheckpointRegistry* checkpoints,
                           Rendezvous* rendezvous, const JobControllerOptions& options)
    : clock_(clock),
      store_(store),
      nodes_(nodes),
      checkpoints_(checkpoints),
      rendezvous_(rendezvous),
      options_(options),
      views_(clock) {}

void JobLifecycle::AddListener(JobListener* listener) { listeners_.push_back(listener); }

// ---- helpers ----

std::shared_ptr<JobLifecycle::Entry> JobLifecycle::Find(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(table_mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<JobLifecycle::Entry>> JobLifecycle::AllEntries() const {
  std::lock_guard<std::mutex> lock(table_mu_);
  std::vector<std::shared_ptr<Entry>> all;
  all.reserve(jobs_.size());
  for (const auto& [id, entry] : jobs_) all.push_back(entry);
  return all;
}

v1::Job JobLifecycle::SnapshotLocked(const Entry& entry) const {
  v1::Job job = entry.record.job;
  auto rank0 = entry.progress.find(0);
  if (rank0 != entry.progress.end()) *job.mutable_progress() = rank0->second;
  absl::StatusOr<v1::CheckpointInfo> latest = checkpoints_->Latest(job.id());
  if (latest.ok()) *job.mutable_last_checkpoint() = *std::move(latest);
  *job.mutable_goodput() = GoodputAt(entry.goodput, clock_->Now());
  if (!entry.checkpoint_interval.why().empty()) *job.mutable_checkpoint_interval() = entry.checkpoint_interval;
  return job;
}


void JobLifecycle::NotifyJobLocked(Entry& entry, const std::vector<v1::JobEvent>& events) {
  for (const v1::JobEvent& e : events) ApplyGoodputEvent(e, &entry.goodput);
  const v1::Job job = SnapshotLocked(entry);
  views_.Publish(job, entry.record.submit_seq);
  for (JobListener* l : listeners_) l->OnJobChanged(job, events);
}

void JobLifecycle::NotifyStopLocked(const std::vector<StopOrder>& orders) {
  for (const StopOrder& order : orders) {
    for (JobListener* l : listeners_) l->OnStopRanks(order);
  }
}

v1::JobEvent JobLifecycle::MakeEvent(const Entry& entry, v1::JobEventKind kind, v1::JobState to,
                                     const std::string& reason, int32_t rank, const std::string& node_id) const {
  v1::JobEvent e;
  e.set_job_id(entry.record.job.id());
  *e.mutable_time() = ToProtoTime(clock_->Now());
  e.set_from_state(entry.record.job.state());
  e.set_to_state(to);
  e.set_kind(kind);
  e.set_reason(CutText(reason, kMaxJobTextBytes));  // a rank's report, a cancel reason
  e.set_generation(entry.record.job.generation());
  e.set_rank(rank);
  e.set_node_id(node_id);
  return e;
}

absl::Status JobLifecycle::CommitLocked(Entry& entry, JobRecord next, std::vector<v1::JobEvent> events,
                                        const v1::Placement* placement) {
  for (const v1::JobEvent& e : events) {
    if (e.from_state() != e.to_state()) RETURN_IF_ERROR(CheckTransition(next.job.id(), e.from_state(), e.to_state()));
  }
  if (placement != nullptr) *next.job.mutable_placement() = *placement;
  if (next.job.message().size() > kMaxJobTextBytes) {
    next.job.set_message(CutText(next.job.message(), kMaxJobTextBytes));
  }
  // The account after these events, stored with them (NotifyJobLocked
  // applies the same events to the entry's).
  if (!events.empty()) *next.job.mutable_goodput() = GoodputAfter(entry.goodput, events);
  ASSIGN_OR_RETURN(std::vector<v1::JobEvent> stored, store_->UpdateJob(next, std::move(events), placement));
  next.job.clear_goodput();  // the entry's account is the live one
  entry.record = std::move(next);
  NotifyJobLocked(entry, stored);
  return absl::OkStatus();
}

std::string JobLifecycle::CheckpointDir(const v1::Job& job) const {
  const std::string& root =
      job.spec().checkpoint().directory().empty() ? options_.checkpoint_root : job.spec().checkpoint().directory();
  return CheckpointGenerationDir(root, job.id(), job.generation());
}

// ---- recovery ----

absl::Status JobLifecycle::Recover() {
  ASSIGN_OR_RETURN(std::vector<JobRecord> records, store_->LoadJobs());
  const absl::Time now = clock_->Now();
  for (JobRecord& record : records) {
    const std::string id = record.job.id();
    auto entry = std::make_shared<Entry>();
    std::lock_guard<std::mutex> entry_lock(entry->mu);
    entry->record = std::move(record);
    {
      std::lock_guard<std::mutex> lock(table_mu_);
      jobs_[id] = entry;
    }
    // The goodput account as stored with the job's last change; a job no
    // coordinator of schema 7 changed has none: its timeline rebuilds it
    // (folded events are missed; checkpoint stalls read back as training).
    if (entry->record.job.has_goodput()) {
      entry->goodput = entry->record.job.goodput();
      entry->record.job.clear_goodput();
    } else {
      ASSIGN_OR_RETURN(std::vector<v1::JobEvent> history, store_->LoadEvents(id, 0));
      for (const v1::JobEvent& e : history) ApplyGoodputEvent(e, &entry->goodput);
    }
    const v1::Job& job = entry->record.job;
    const v1::JobState state = job.state();
    entry->last_progress = now;
    entry->rendezvous_deadline = now + options_.rendezvous_timeout;
    if (job.generation() > 0 && !IsTerminal(state) && state != v1::JOB_STATE_QUEUED) {
      // The ranks may still be running: their slots are held until the
      // workers say otherwise (NodeReconciler) or report their exits.
      std::map<std::string, std::vector<RankSlot>> by_node;
      const bool cuda = job.spec().resources().device() != v1::ResourceSpec::CPU;
      for (const v1::RankAssignment& r : job.placement().ranks()) {
        by_node[r.node_id()].push_back({id, job.generation(), r.global_rank(), r.gpu_uuid(),
                                        cuda ? 0 : job.spec().resources().cpus_per_rank(),
                                        r.global_rank() == 0 ? job.placement().master_port() : 0});
      }
      for (const auto& [node_id, slots] : by_node) {
        if (absl::Status s = nodes_->Reserve(node_id, slots); !s.ok()) {
          spdlog::warn("job {}: slots on {} not re-reserved: {}", id, node_id, s.ToString());
        }
      }
    }
    if (job.generation() > 0 && state == v1::JOB_STATE_RUNNING) {
      // Past its rendezvous: it continues. Fencing keeps working.
      rendezvous_->BeginGeneration(id, job.generation(), job.placement().world_size(), entry->rendezvous_deadline,
                                   /*already_complete=*/true);
      v1::JobEvent event = MakeEvent(*entry, v1::JOB_EVENT_KIND_RECOVERED, v1::JOB_STATE_RUNNING,
                                     absl::StrCat("coordinator restarted; generation ", job.generation(), " continues"));
      RETURN_IF_ERROR(CommitLocked(*entry, entry->record, {event}));
    } else if (job.generation() > 0 && (state == v1::JOB_STATE_PLACED || state == v1::JOB_STATE_STARTING)) {
      // Its rendezvous state (published NCCL ids, keys) died with the old
      // coordinator: start the generation again.
      RETURN_IF_ERROR(FailGenerationLocked(
          *entry, {v1::JOB_EVENT_KIND_RECOVERED,
                   absl::StrCat("coordinator restarted during the rendezvous of generation ", job.generation())}));
    } else {
      if (job.generation() > 0) rendezvous_->EndGeneration(id, job.generation());  // RESTARTING or terminal: fenced
      views_.Publish(SnapshotLocked(*entry), entry->record.submit_seq);
    }
  }
  return absl::OkStatus();
}

// ---- JobService ----

absl::StatusOr<v1::Job> JobLifecycle::Submit(v1::JobSpec spec, const SubmitOptions& options) {
  RETURN_IF_ERROR(CheckSubmitOptions(options));
  v1::SubmittedSpec as_sent;
  *as_sent.mutable_spec() = spec;
  as_sent.mutable_overrides()->Assign(options.overrides.begin(), options.overrides.end());
  RETURN_IF_ERROR(AdmitJobSpec(&spec, options_));
  if (options.validate_only) {
    JobRecord probe;  // what the scheduler would be asked: `validate` checks against the cluster
    *probe.job.mutable_spec() = std::move(spec);
    *probe.job.mutable_submitted() = std::move(as_sent);
    if (std::optional<std::string> why = Unschedulable(RequestFor(probe), nodes_->SchedulableCapacity())) {
      probe.job.set_unschedulable(*why);
    }
    return probe.job;
  }
  auto entry = std::make_shared<Entry>();
  entry->record.job.set_state(v1::JOB_STATE_UNSPECIFIED);
  JobRecord record;
  record.user = options.user;
  record.job.set_owner(options.user);
  record.request_id = options.request_id;
  record.job.set_state(v1::JOB_STATE_QUEUED);
  *record.job.mutable_spec() = std::move(spec);
  *record.job.mutable_submitted() = std::move(as_sent);
  *record.job.mutable_submit_time() = ToProtoTime(clock_->Now());
  record.job.set_message("queued");
  v1::JobEvent submitted =
      MakeEvent(*entry, v1::JOB_EVENT_KIND_SUBMITTED, v1::JOB_STATE_QUEUED,
                options.user.empty() ? "submitted" : absl::StrCat("submitted by ", options.user));
  // No lock: the job is nobody's yet. A request id used before returns its job.
  bool created = false;
  ASSIGN_OR_RETURN(JobRecord stored, store_->CreateJob(record, submitted, &created));
  if (!created) {
    // The job as readers see it now; as stored, while its first submission
    // is still being entered.
    absl::StatusOr<v1::Job> existing = views_.GetJob(stored.job.id());
    return existing.ok() ? *std::move(existing) : stored.job;
  }
  std::lock_guard<std::mutex> entry_lock(entry->mu);
  entry->record = std::move(stored);
  if (std::optional<std::string> why = Unschedulable(RequestFor(entry->record), nodes_->SchedulableCapacity())) {
    entry->record.job.set_unschedulable(*why);
  }
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    jobs_[entry->record.job.id()] = entry;
  }
  submitted.set_job_id(entry->record.job.id());
  submitted.set_sequence(1);
  NotifyJobLocked(*entry, {submitted});
  return SnapshotLocked(*entry);
}

absl::StatusOr<std::vector<v1::JobEvent>> JobLifecycle::GetEvents(const std::string& job_id,
                                                                 int64_t after_sequence) const {
  if (Find(job_id) == nullptr) return JobNotFoundError(job_id);
  return store_->LoadEvents(job_id, after_sequence);
}

absl::StatusOr<EventPage> JobLifecycle::GetEventPage(const std::string& job_id, const EventPageQuery& query) const {
  if (Find(job_id) == nullptr) return JobNotFoundError(job_id);
  return store_->LoadEventPage(job_id, query);
}

absl::Status JobLifecycle::SnapshotJob(const std::string& job_id, int64_t after_sequence,
                                       const std::function<void(const v1::Job&, const EventPage&)>& at_snapshot) const {
  std::shared_ptr<Entry> entry = Find(job_id);
  if (entry == nullptr) return JobNotFoundError(job_id);
  // The job's own lock: its events are written under it too, so none can
  // slip between this read and the subscription made in at_snapshot. One
  // page, the newest: the locks are never held across a whole history.
  std::lock_guard<std::mutex> lock(entry->mu);
  EventPageQuery query;
  query.after_sequence = after_sequence;
  query.max_events = kMaxWatchEvents;
  query.max_bytes = kMaxWatchEventBytes;
  ASSIGN_OR_RETURN(EventPage events, store_->LoadEventPage(job_id, query));
  at_snapshot(SnapshotLocked(*entry), events);
  return absl::OkStatus();
}

absl::StatusOr<CancelResult> JobLifecycle::Cancel(const std::string& job_id, const std::string& reason) {
  if (reason.size() > kMaxCancelReasonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reason: at most ", kMaxCancelReasonBytes, " bytes, got ", reason.size()));
  }
  std::shared_ptr<Entry> found = Find(job_id);
  if (found == nullptr) return JobNotFoundError(job_id);
  Entry& entry = *found;
  std::lock_guard<std::mutex> lock(entry.mu);
  CancelResult result;
  if (IsTerminal(entry.record.job.state())) {
    result.job = SnapshotLocked(entry);
    return result;
  }
  const std::string why = reason.empty() ? "cancelled" : absl::StrCat("cancelled: ", reason);
  std::vector<StopOrder> stop = StopOrdersLocked(entry, why, "");
  JobRecord next = entry.record;
  next.job.set_state(v1::JOB_STATE_CANCELLED);
  next.job.set_reason(ReasonCode(v1::JOB_EVENT_KIND_CANCELLED));
  next.job.set_message(why);
  *next.job.mutable_end_time() = ToProtoTime(clock_->Now());
  RETURN_IF_ERROR(CommitLocked(entry, std::move(next),
                               {MakeEvent(entry, v1::JOB_EVENT_KIND_CANCELLED, v1::JOB_STATE_CANCELLED, why)}));
  rendezvous_->EndGeneration(job_id, entry.record.job.generation());
  NotifyStopLocked(stop);
  result.job = SnapshotLocked(entry);
  result.stop = std::move(stop);
  return result;
}

absl::StatusOr<std::vector<v1::CheckpointInfo>> JobLifecycle::ListCheckpoints(const std::string& job_id,
                                                                             bool include_incomplete) const {
  if (Find(job_id) == nullptr) return JobNotFoundError(job_id);
  return checkpoints_->List(job_id, include_incomplete);
}

absl::StatusOr<v1::CheckpointInfo> JobLifecycle::LatestCheckpoint(const std::string& job_id) const {
  if (Find(job_id) == nullptr) return JobNotFoundError(job_id);
  return checkpoints_->Latest(job_id);
}

absl::StatusOr<std::vector<std::string>> JobLifecycle::ExpireFinished(absl::Time now,
                                                                      const JobRetention& retention) {
  std::vector<std::string> expired = SelectExpired(views_.Finished(), retention, now);
  if (expired.empty()) return expired;
  // A terminal job never changes again, so no transition can race with this.
  RETURN_IF_ERROR(store_->DeleteJobs(expired));
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    for (const std::string& id : expired) jobs_.erase(id);
  }
  views_.Erase(expired);
  for (const std::string& id : expired) checkpoints_->Forget(id);
  return expired;
}

}  // namespace ringmaster::coordinator
