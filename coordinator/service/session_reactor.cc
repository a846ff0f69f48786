#include "coordinator/service/session_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "coordinator/service/node_identity.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {

SessionReactor::SessionReactor(JobController* controller, NodeRegistry* nodes, NodeSessions* sessions,
                               Executor* executor, SessionOptions options, absl::StatusOr<std::string> caller)
    : controller_(controller),
      nodes_(nodes),
      sessions_(sessions),
      executor_(executor),
      options_(options),
      caller_(std::move(caller)) {
  StartRead(&incoming_);
}

bool SessionReactor::Post(std::function<void()> task) {
  refs_.fetch_add(1);
  if (executor_->Post([this, task = std::move(task)] {
        task();
        Unref();
      })) {
    return true;
  }
  refs_.fetch_sub(1);
  return false;
}

void SessionReactor::Unref() {
  if (refs_.fetch_sub(1) == 1) delete this;
}

void SessionReactor::FailLocked(const grpc::Status& status) {
  if (!finish_with_.has_value()) finish_with_ = status;
}

void SessionReactor::OnReadDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {
      FailLocked(grpc::Status::OK);  // the worker ended the session (or went away)
    } else {
      handling_ = true;
      v1::WorkerMessage message = std::move(incoming_);
      if (!Post([this, message = std::move(message)] { Handle(message); })) {
        handling_ = false;
        FailLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down"));
      }
    }
  }
  Pump();
}

void SessionReactor::Handle(const v1::WorkerMessage& message) {
  absl::Status status;
  if (node_id_.empty()) {
    status = message.has_open() ? HandleOpen(message.open())
                                : absl::InvalidArgumentError("the first message of a session must be `open`");
  } else {
    switch (message.kind_case()) {
      case v1::WorkerMessage::kOpen:
        status = absl::InvalidArgumentError("open: sent twice on one session");
        break;
      case v1::WorkerMessage::kHeartbeat:
        status = HandleHeartbeat(message.heartbeat());
        break;
      case v1::WorkerMessage::kProgress:
        status = HandleProgress(message.progress());
        break;
      case v1::WorkerMessage::kStartResult:
        status = HandleStartResult(message.start_result());
        break;
      case v1::WorkerMessage::kDrain:
        HandleDrain(message.drain());
        break;
      default:
        break;  // a kind this coordinator does not know: ignored
    }
  }
  bool read_next = false;
  bool detach = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handling_ = false;
    if (!status.ok()) {
      FailLocked(ToGrpcStatus(status));
      detach = attached_;  // orders from now on wait for the next session
      attached_ = false;
    }
    if (!finish_with_.has_value() && !finished_) {
      read_next = true;
      ++starting_reads_;
    }
  }
  if (detach) sessions_->Detach(node_id_, this);
  if (read_next) {
    StartRead(&incoming_);
    std::lock_guard<std::mutex> lock(mu_);
    --starting_reads_;
  }
  Pump();
}

absl::Status SessionReactor::HandleOpen(const v1::SessionOpen& open) {
  if (open.node_id().empty()) return absl::InvalidArgumentError("open.node_id: must not be empty");
  if (!caller_.ok()) return caller_.status();
  RETURN_IF_ERROR(CheckNamedNode(*caller_, open.node_id(), "open.node_id"));
  absl::Status status = sessions_->Attach(open.node_id(), open.session_id(), this);
  if (!status.ok()) return status;
  node_id_ = open.node_id();
  session_id_ = open.session_id();
  std::lock_guard<std::mutex> lock(mu_);
  attached_ = true;
  spdlog::info("node {}: session {} open", node_id_, session_id_);
  return absl::OkStatus();
}

absl::Status SessionReactor::HandleHeartbeat(const v1::Heartbeat& heartbeat) {
  // Bounded: the reason is stored with the node and listed by `ringmaster nodes`.
  absl::StatusOr<absl::Time> expiry =
      nodes_->Heartbeat(node_id_, session_id_, heartbeat.health_failure().substr(0, 512));
  if (!expiry.ok()) return expiry.status();
  v1::CoordinatorMessage grant;
  *grant.mutable_lease()->mutable_expiry() = ToProtoTime(*expiry);
  Send(std::move(grant));
  return absl::OkStatus();
}

absl::Status SessionReactor::HandleStartResult(const v1::StartRanksResult& result) {
  if (result.error().empty()) return absl::OkStatus();
  // The generation (and every rank said to have started) must be placed here.
  absl::Status placed = controller_->lifecycle().CheckPlacedOn(
      node_id_, result.job_id(), result.generation(),
      std::vector<int32_t>(result.started_ranks().begin(), result.started_ranks().end()));
  if (placed.code() == absl::StatusCode::kNotFound) return absl::OkStatus();  // a job no longer known: nothing to fail
  RETURN_IF_ERROR(placed);
  spdlog::warn("node {}: job {} generation {}: not every rank started: {}", node_id_, result.job_id(),
               result.generation(), result.error());
  absl::Status s = controller_->lifecycle().ReportStartFailure(
      {node_id_, result.job_id(), result.generation(), result.error(), result.unrecoverable(),
       std::vector<int32_t>(result.started_ranks().begin(), result.started_ranks().end())});
  if (!s.ok()) spdlog::error("node {}: start failure of job {} not applied: {}", node_id_, result.job_id(), s.ToString());
  return absl::OkStatus();
}

void SessionReactor::HandleDrain(const v1::DrainRequest& drain) {
  const std::string reason = drain.reason().empty() ? "the worker drains its node" : drain.reason().substr(0, 256);
  absl::StatusOr<DrainResult> result = controller_->DrainNode(node_id_, kCordonedByWorker, reason);
  if (!result.ok()) {
    spdlog::error("node {}: the worker's drain request failed: {}", node_id_, result.status().ToString());
    return;
  }
  spdlog::info("node {} ({}) drains itself ({}): {} job(s) to move", node_id_, result->node.hostname(), reason,
               result->job_ids.size());
}

absl::Status SessionReactor::HandleProgress(const v1::RankProgress& progress) {
  // A rank of a job no longer known is told to stop (NOT_FOUND below).
  absl::Status placed = controller_->lifecycle().CheckPlacedOn(node_id_, progress.job_id(), progress.generation(),
                                                               {progress.global_rank()});
  if (placed.code() != absl::StatusCode::kNotFound) RETURN_IF_ERROR(placed);
  absl::StatusOr<bool> over = placed.ok()
                                  ? controller_->lifecycle().ReportProgress(progress.job_id(), progress.generation(),
                                                                            progress.global_rank(), progress.metrics())
                                  : absl::StatusOr<bool>(placed);
  std::string reason;
  if (over.ok() && *over) {
    reason = absl::StrCat("generation ", progress.generation(), " of job ", progress.job_id(), " is over");
  } else if (over.status().code() == absl::StatusCode::kNotFound) {
    reason = std::string(over.status().message());
  } else if (!over.ok()) {
    spdlog::warn("node {}: progress of job {} rank {} not recorded: {}", node_id_, progress.job_id(),
                 progress.global_rank(), over.status().ToString());
    return absl::OkStatus();
  } else {
    return absl::OkStatus();
  }
  v1::CoordinatorMessage message;
  v1::StopRanks* stop = message.mutable_stop();
  stop->set_job_id(progress.job_id());
  stop->set_generation(progress.generation());
  stop->add_global_ranks(progress.global_rank());
  *stop->mutable_grace_period() = ToProtoDuration(options_.stop_grace_period);
  stop->set_reason(reason);
  Send(std::move(message));
  return absl::OkStatus();
}

void SessionReactor::Send(v1::CoordinatorMessage message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || finish_with_.has_value()) return;
  if (outbox_.size() >= options_.max_outbox) {
    FailLocked(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("the worker does not read its session: ", outbox_.size(), " messages are waiting")));
  } else {
    outbox_.push_back(std::move(message));
  }
  PostPumpLocked();
}

void SessionReactor::Close(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  attached_ = false;  // NodeSessions dropped us
  FailLocked(ToGrpcStatus(status));
  PostPumpLocked();
}

void SessionReactor::PostPumpLocked() {
  if (pump_posted_ || finished_) return;
  pump_posted_ = true;
  if (!Post([this] {
        {
          std::lock_guard<std::mutex> lock(mu_);
          pump_posted_ = false;
        }
        Pump();
      })) {
    pump_posted_ = false;
  }
}

void SessionReactor::Pump() {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_) return;
  if (finish_with_.has_value()) {
    // Finish only once nothing else is started or about to start.
    if (writing_ || handling_ || starting_reads_ > 0) return;
    finished_ = true;
    const grpc::Status status = *finish_with_;
    lock.unlock();
    Finish(status);
    return;
  }
  if (writing_ || outbox_.empty()) return;
  writing_message_ = std::move(outbox_.front());
  outbox_.pop_front();
  writing_ = true;
  lock.unlock();
  StartWrite(&writing_message_);
}

void SessionReactor::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) FailLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the session was closed"));
  }
  Pump();
}

void SessionReactor::OnDone() {
  bool attached;
  {
    std::lock_guard<std::mutex> lock(mu_);
    attached = attached_;
    attached_ = false;
  }
  if (attached) {
    sessions_->Detach(node_id_, this);  // the node is left to its lease
    spdlog::info("node {}: session {} closed", node_id_, session_id_);
  }
  Unref();
}

}  // namespace ringmaster::coordinator
