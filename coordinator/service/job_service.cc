#include "coordinator/service/job_service.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "coordinator/core/job_summary.h"
#include "coordinator/service/auth_processor.h"
#include "coordinator/service/finish_on_executor.h"
#include "common/grpc_status.h"
#include "common/proto_time.h"
#include "common/spec_limits.h"
#include "coordinator/service/watch_job_reactor.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

absl::Status RequireJobId(const std::string& job_id) {
  return job_id.empty() ? absl::InvalidArgumentError("job_id: must not be empty") : absl::OkStatus();
}

constexpr int32_t kDefaultEventsPageSize = 100;
constexpr int32_t kMaxEventsPageSize = 1000;
constexpr size_t kMaxEventsPageBytes = size_t{1} << 20;

// GetJobRequest's page of events: its size and its token (a sequence number
// the previous page began at, as GetJob or WatchJob returned it).
absl::StatusOr<EventPageQuery> EventsPageQuery(const v1::GetJobRequest& request) {
  if (request.events_page_size() < 0 || request.events_page_size() > kMaxEventsPageSize) {
    return absl::InvalidArgumentError(absl::StrCat("events_page_size: must be in [0, ", kMaxEventsPageSize,
                                                   "], got ", request.events_page_size()));
  }
  EventPageQuery query;
  query.max_events = request.events_page_size() == 0 ? kDefaultEventsPageSize : request.events_page_size();
  query.max_bytes = kMaxEventsPageBytes;
  if (!request.events_page_token().empty() &&
      (!absl::SimpleAtoi(request.events_page_token(), &query.before_sequence) || query.before_sequence < 1)) {
    return absl::InvalidArgumentError("events_page_token: not a token GetJob or WatchJob returned");
  }
  return query;
}

v1::Slots SlotsOf(const QueueResources& r) {
  v1::Slots s;
  s.set_gpus(r.gpus == QueueResources::kUnlimited ? -1 : r.gpus);
  s.set_cpu_slots(r.cpu_slots == QueueResources::kUnlimited ? -1 : r.cpu_slots);
  return s;
}

// A queue as ListQueues shows it; -1 in a quota: unlimited.
v1::QueueInfo QueueInfoOf(const Queue& q, const std::map<std::string, Dispatcher::QueueLoad>& loads,
                          double decayed_usage) {
  v1::QueueInfo info;
  info.set_name(q.name);
  for (const std::string& m : q.members) info.add_members(m);
  *info.mutable_nominal() = SlotsOf(q.nominal);
  *info.mutable_borrowing_limit() = SlotsOf(q.borrowing_limit);
  info.set_unlimited_borrowing(q.borrowing_limit.gpus == QueueResources::kUnlimited &&
                               q.borrowing_limit.cpu_slots == QueueResources::kUnlimited);
  info.set_weight(q.weight);
  info.set_decayed_usage(decayed_usage);
  info.set_preempt_within_queue(q.preempt_within_queue);
  auto it = loads.find(q.name);
  if (it == loads.end()) return info;
  const Dispatcher::QueueLoad& load = it->second;
  info.mutable_used()->set_gpus(load.used.gpus);
  info.mutable_used()->set_cpu_slots(load.used.cpu_slots);
  info.mutable_borrowed()->set_gpus(std::max<int64_t>(0, load.used.gpus - q.nominal.gpus));
  info.mutable_borrowed()->set_cpu_slots(std::max<int64_t>(0, load.used.cpu_slots - q.nominal.cpu_slots));
  info.set_running_jobs(load.running_jobs);
  info.set_waiting_jobs(load.waiting_jobs);
  return info;
}

}  // namespace

JobService::JobService(JobController* controller, const NodeRegistry* nodes, JobWatchers* watchers, LogStore* logs,
                       const Accounting* accounting, Executor* executor, std::function<void()> poke,
                       Visibility visibility, StreamLogsOptions log_options)
    : controller_(controller),
      nodes_(nodes),
      watchers_(watchers),
      logs_(logs),
      accounting_(accounting),
      executor_(executor),
      poke_(std::move(poke)),
      visibility_(visibility),
      log_options_(log_options) {}

absl::Status JobService::CanRead(const Caller& caller, const v1::Job& job) const {
  return AuthorizeRead(caller, {job.id(), job.owner(), job.spec().queue()}, *controller_->queues().config(),
                       visibility_);
}

std::function<absl::Status(const v1::Job&)> JobService::ReadCheck(const Caller& caller) const {
  return [this, caller](const v1::Job& job) { return CanRead(caller, job); };
}

grpc::ServerUnaryReactor* JobService::Submit(grpc::CallbackServerContext* context, const v1::SubmitJobRequest* request,
                                             v1::SubmitJobResponse* response) {
  if (!request->has_spec()) return Reply(context, absl::InvalidArgumentError("spec: must be set"));
  SubmitOptions options;
  options.request_id = request->request_id();
  options.validate_only = request->validate_only();
  options.overrides.assign(request->overrides().begin(), request->overrides().end());
  options.user = CallerOf(*context).user;  // the job's owner
  return FinishOnExecutor(context, executor_, [this, request, response, options = std::move(options)] {
    absl::StatusOr<v1::Job> job = controller_->Submit(request->spec(), options);
    if (!job.ok()) return job.status();
    if (!job->unschedulable().empty()) {
      response->add_warnings(absl::StrCat("no node registered now could run this job: ", job->unschedulable(),
                                          "; it stays queued until one registers"));
    }
    *response->mutable_job() = *std::move(job);
    response->mutable_job()->clear_submitted();  // the request's own spec: the answer stays small
    if (!options.validate_only && poke_) poke_();
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobService::GetJob(grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
                                             v1::GetJobResponse* response) {
  if (absl::Status s = RequireJobId(request->job_id()); !s.ok()) return Reply(context, s);
  absl::StatusOr<EventPageQuery> query = EventsPageQuery(*request);
  if (!query.ok()) return Reply(context, query.status());
  absl::StatusOr<v1::Job> job = controller_->views().GetJob(request->job_id());
  if (!job.ok()) return Reply(context, job.status());
  if (absl::Status s = CanRead(CallerOf(*context), *job); !s.ok()) return Reply(context, s);
  *response->mutable_job() = *std::move(job);
  AbridgeJob(response->mutable_job());  // only a job stored before the spec's limits
  if (request->include_events()) {
    absl::StatusOr<EventPage> page = controller_->lifecycle().GetEventPage(request->job_id(), *query);
    if (!page.ok()) return Reply(context, page.status());
    for (v1::JobEvent& e : page->events) *response->add_events() = std::move(e);
    if (page->more) response->set_events_next_page_token(absl::StrCat(response->events(0).sequence()));
  }
  return Reply(context, absl::OkStatus());
}

namespace {

// What ListJobs keeps of a job the caller may not read (proto/job.proto,
// JobSummary): where it stands in the queue and what it holds, not what it is.
void HideSpec(v1::JobSummary* job) {
  v1::JobSpecSummary* spec = job->mutable_spec();
  spec->clear_name();
  spec->clear_labels();
  spec->mutable_resources()->clear_node_selector();
  job->clear_message();
  job->clear_unschedulable();
  job->clear_progress();
  job->set_abridged(false);  // nothing of what it would be about is shown
  job->set_spec_hidden(true);
}

// A selector within the labels' own bounds (common/spec_limits.h): one no job
// can carry matches nothing, and every entry is compared with every job.
absl::Status CheckLabelSelector(const google::protobuf::Map<std::string, std::string>& selector) {
  if (selector.size() > static_cast<size_t>(kMaxLabels)) {
    return absl::InvalidArgumentError(
        absl::StrCat("label_selector: at most ", kMaxLabels, " entries (a job has at most that many labels), got ",
                     selector.size()));
  }
  for (const auto& [key, value] : selector) {
    if (key.size() > kMaxLabelKeyBytes || value.size() > kMaxLabelValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat("label_selector: keys of at most ", kMaxLabelKeyBytes,
                                                     " bytes and values of at most ", kMaxLabelValueBytes,
                                                     " bytes, as labels; got ", key.size(), " and ", value.size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* JobService::ListJobs(grpc::CallbackServerContext* context, const v1::ListJobsRequest* request,
                                               v1::ListJobsResponse* response) {
  if (absl::Status s = CheckLabelSelector(request->label_selector()); !s.ok()) return Reply(context, s);
  ListJobsQuery query;
  for (int s : request->states()) query.states.push_back(static_cast<v1::JobState>(s));
  std::sort(query.states.begin(), query.states.end());  // each state once, however often it is named
  query.states.erase(std::unique(query.states.begin(), query.states.end()), query.states.end());
  query.label_selector.insert(request->label_selector().begin(), request->label_selector().end());
  query.page_size = request->page_size();
  query.page_token = request->page_token();
  absl::StatusOr<ListJobsPage> page = controller_->views().ListJobs(query);
  if (!page.ok()) return Reply(context, page.status());
  const Caller caller = CallerOf(*context);
  const std::shared_ptr<const QueueConfig> queues = controller_->queues().config();
  for (v1::JobSummary& job : page->jobs) {
    const JobReadScope scope{job.id(), job.owner(), job.spec().queue()};
    if (!AuthorizeRead(caller, scope, *queues, visibility_).ok()) HideSpec(&job);
    *response->add_jobs() = std::move(job);
  }
  response->set_next_page_token(page->next_page_token);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* JobService::CancelJob(grpc::CallbackServerContext* context,
                                                const v1::CancelJobRequest* request, v1::CancelJobResponse* response) {
  if (absl::Status s = RequireJobId(request->job_id()); !s.ok()) return Reply(context, s);
  return FinishOnExecutor(context, executor_, [this, request, response, caller = CallerOf(*context)] {
    absl::StatusOr<v1::Job> job = controller_->views().GetJob(request->job_id());  // the owner never changes
    if (!job.ok()) return job.status();
    if (absl::Status s = AuthorizeCancel(caller, job->owner(), job->id()); !s.ok()) return s;
    absl::StatusOr<CancelResult> result = controller_->lifecycle().Cancel(request->job_id(), request->reason());
    if (!result.ok()) return result.status();
    *response->mutable_job() = std::move(result->job);
    AbridgeJob(response->mutable_job());
    if (poke_) poke_();  // the queue changed
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::LogChunk>* JobService::StreamLogs(grpc::CallbackServerContext* context,
                                                               const v1::StreamLogsRequest* request) {
  return new StreamLogsReactor(controller_, watchers_, logs_, executor_, *request, log_options_,
                               ReadCheck(CallerOf(*context)));
}

grpc::ServerWriteReactor<v1::WatchJobResponse>* JobService::WatchJob(grpc::CallbackServerContext* context,
                                                                     const v1::WatchJobRequest* request) {
  return new WatchJobReactor(controller_, watchers_, executor_, *request, ReadCheck(CallerOf(*context)));
}

grpc::ServerUnaryReactor* JobService::ListNodes(grpc::CallbackServerContext* context,
                                                const v1::ListNodesRequest* request, v1::ListNodesResponse* response) {
  constexpr int kMaxNodesPage = 1000;
  constexpr size_t kMaxNodesPageBytes = size_t{1} << 20;
  if (request->page_size() < 0 || request->page_size() > kMaxNodesPage) {
    return Reply(context, absl::InvalidArgumentError(absl::StrCat("page_size: must be in [0, ", kMaxNodesPage,
                                                                  "] (0: ", kMaxNodesPage, "), got ",
                                                                  request->page_size())));
  }
  // The token is the last node of the previous page: "<hostname>\n<node id>".
  std::string after_hostname, after_node_id;
  if (!request->page_token().empty()) {
    const size_t cut = request->page_token().rfind('\n');
    if (cut == std::string::npos) {
      return Reply(context, absl::InvalidArgumentError("page_token: not a token ListNodes returned"));
    }
    after_hostname = request->page_token().substr(0, cut);
    after_node_id = request->page_token().substr(cut + 1);
  }
  std::vector<v1::NodeState> states;
  for (int s : request->states()) states.push_back(static_cast<v1::NodeState>(s));
  std::sort(states.begin(), states.end());
  states.erase(std::unique(states.begin(), states.end()), states.end());
  NodeRegistry::NodePage page =
      nodes_->ListNodesPage(states, after_hostname, after_node_id,
                            request->page_size() == 0 ? kMaxNodesPage : request->page_size(), kMaxNodesPageBytes);
  for (v1::NodeInfo& node : page.nodes) *response->add_nodes() = std::move(node);
  if (page.more && response->nodes_size() > 0) {
    const v1::NodeInfo& last = response->nodes(response->nodes_size() - 1);
    response->set_next_page_token(absl::StrCat(last.hostname(), "\n", last.node_id()));
  }
  response->set_total_size(page.total);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* JobService::CordonNode(grpc::CallbackServerContext* context,
                                                 const v1::CordonNodeRequest* request,
                                                 v1::CordonNodeResponse* response) {
  const Caller caller = CallerOf(*context);
  if (request->node().empty()) return Reply(context, absl::InvalidArgumentError("node: must not be empty"));
  if (absl::Status s = AuthorizeNodeAdmin(caller, request->uncordon() ? "uncordon" : "cordon"); !s.ok()) {
    return Reply(context, s);
  }
  return FinishOnExecutor(context, executor_, [this, request, response, caller] {
    absl::StatusOr<v1::NodeInfo> node = controller_->CordonNode(
        request->node(), request->uncordon() ? "" : OperatorName(caller), request->reason().substr(0, 256));
    if (!node.ok()) return node.status();
    spdlog::info("node {} {} by {}{}", node->hostname(), request->uncordon() ? "uncordoned" : "cordoned",
                 OperatorName(caller), request->reason().empty() ? "" : ": " + request->reason().substr(0, 256));
    *response->mutable_node() = *std::move(node);
    if (poke_) poke_();  // uncordoned capacity may place waiting jobs
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobService::DrainNode(grpc::CallbackServerContext* context,
                                                const v1::DrainNodeRequest* request,
                                                v1::DrainNodeResponse* response) {
  const Caller caller = CallerOf(*context);
  if (request->node().empty()) return Reply(context, absl::InvalidArgumentError("node: must not be empty"));
  if (absl::Status s = AuthorizeNodeAdmin(caller, "drain"); !s.ok()) return Reply(context, s);
  return FinishOnExecutor(context, executor_, [this, request, response, caller] {
    absl::StatusOr<DrainResult> result =
        controller_->DrainNode(request->node(), OperatorName(caller), request->reason().substr(0, 256));
    if (!result.ok()) return result.status();
    spdlog::info("node {} drained by {}: {} job(s) to move", result->node.hostname(), OperatorName(caller),
                 result->job_ids.size());
    *response->mutable_node() = std::move(result->node);
    for (std::string& id : result->job_ids) response->add_job_ids(std::move(id));
    if (poke_) poke_();  // jobs moved at once wait for a placement
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobService::ListCheckpoints(grpc::CallbackServerContext* context,
                                                      const v1::ListCheckpointsRequest* request,
                                                      v1::ListCheckpointsResponse* response) {
  if (absl::Status s = RequireJobId(request->job_id()); !s.ok()) return Reply(context, s);
  absl::StatusOr<v1::Job> job = controller_->views().GetJob(request->job_id());
  if (!job.ok()) return Reply(context, job.status());
  if (absl::Status s = CanRead(CallerOf(*context), *job); !s.ok()) return Reply(context, s);
  absl::StatusOr<std::vector<v1::CheckpointInfo>> checkpoints =
      controller_->lifecycle().ListCheckpoints(request->job_id(), request->include_incomplete());
  if (!checkpoints.ok()) return Reply(context, checkpoints.status());
  for (v1::CheckpointInfo& c : *checkpoints) *response->add_checkpoints() = std::move(c);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* JobService::ListQueues(grpc::CallbackServerContext* context,
                                                 const v1::ListQueuesRequest* /*request*/,
                                                 v1::ListQueuesResponse* response) {
  const Caller caller = CallerOf(*context);
  const std::shared_ptr<const QueueConfig> config = controller_->queues().config();
  const std::map<std::string, Dispatcher::QueueLoad> loads = controller_->QueueLoads();
  for (const Queue& q : config->queues()) {
    // Admins (and everyone, without user authentication) see every queue.
    if (!caller.admin && !caller.user.empty() && !q.HasMember(caller.user)) continue;
    *response->add_queues() = QueueInfoOf(q, loads, controller_->queues().DecayedUsage(q.name));
  }
  if (config->fair_share().half_life != absl::InfiniteDuration()) {  // unset: usage never decays
    *response->mutable_half_life() = ToProtoDuration(config->fair_share().half_life);
  }
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* JobService::GetUsage(grpc::CallbackServerContext* context, const v1::GetUsageRequest* request,
                                               v1::GetUsageResponse* response) {
  UsageGroup by = UsageGroup::kUser;
  switch (request->by()) {
    case v1::GetUsageRequest::GROUP_BY_UNSPECIFIED:
    case v1::GetUsageRequest::GROUP_BY_USER:
      break;
    case v1::GetUsageRequest::GROUP_BY_QUEUE:
      by = UsageGroup::kQueue;
      break;
    case v1::GetUsageRequest::GROUP_BY_JOB:
      by = UsageGroup::kJob;
      break;
    default:
      return Reply(context, absl::InvalidArgumentError(absl::StrCat(
                                "by: unknown grouping ", static_cast<int>(request->by()), "; use user, queue or job")));
  }
  const absl::Time since = request->has_since() ? FromProtoTime(request->since()) : absl::InfinitePast();
  // Only reads (one query): answered here, as GetJob's events are.
  absl::StatusOr<UsageReport> report = accounting_->Usage(by, since, UsageVisibleTo(CallerOf(*context)));
  if (!report.ok()) return Reply(context, report.status());
  for (const UsageTotal& t : report->rows) {
    v1::UsageRow* row = response->add_rows();
    row->set_key(t.key);
    row->set_gpu_seconds(t.gpu_seconds);
    row->set_cpu_slot_seconds(t.cpu_slot_seconds);
    row->set_placements(static_cast<int32_t>(t.placements));
  }
  *response->mutable_as_of() = ToProtoTime(report->as_of);
  return Reply(context, absl::OkStatus());
}

}  // namespace ringmaster::coordinator
