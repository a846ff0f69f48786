#include "coordinator/service/stream_logs_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "coordinator/core/job_state_machine.h"

namespace ringmaster::coordinator {
namespace {

grpc::Status Invalid(const std::string& message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message); }

}  // namespace

StreamLogsReactor::StreamLogsReactor(const JobController* controller, JobWatchers* watchers, LogStore* logs,
                                     Executor* executor, const v1::StreamLogsRequest& request,
                                     StreamLogsOptions options,
                                     std::function<absl::Status(const v1::Job&)> authorize)
    : controller_(controller),
      watchers_(watchers),
      logs_(logs),
      executor_(executor),
      request_(request),
      options_(options),
      authorize_(std::move(authorize)) {
  if (request_.job_id().empty()) {
    finish_with_ = Invalid("job_id: must not be empty");
  } else if (request_.has_rank() && request_.rank() < 0) {
    finish_with_ = Invalid(absl::StrCat("rank: must be >= 0, got ", request_.rank()));
  } else if (request_.generation() < 0) {
    finish_with_ = Invalid(absl::StrCat("generation: must be >= 0, got ", request_.generation()));
  } else if (request_.tail_lines() < 0) {
    finish_with_ = Invalid(absl::StrCat("tail_lines: must be >= 0, got ", request_.tail_lines()));
  } else if (!Post([this] { Begin(); })) {
    finish_with_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
  }
  Pump();
}

bool StreamLogsReactor::Post(std::function<void()> task, absl::Duration delay) {
  refs_.fetch_add(1);
  if (executor_->PostAfter(delay, [this, task = std::move(task)] {
        task();
        Unref();
      })) {
    return true;
  }
  refs_.fetch_sub(1);
  return false;
}

void StreamLogsReactor::Unref() {
  if (refs_.fetch_sub(1) == 1) delete this;
}

void StreamLogsReactor::Begin() {
  const std::string& job_id = request_.job_id();
  if (request_.follow()) {
    // Subscribe before reading the job: neither its end nor a line is missed.
    const int64_t watch = watchers_->Subscribe(job_id, this);
    const int64_t appends = logs_->Subscribe(job_id, [this] { OnAppend(); });
    std::unique_lock<std::mutex> lock(mu_);
    if (done_) {
      lock.unlock();
      if (watch != 0) watchers_->Unsubscribe(watch);
      logs_->Unsubscribe(appends);
      return;
    }
    watch_subscription_ = watch;
    log_subscription_ = appends;
    if (watch == 0) finish_with_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
  }
  absl::StatusOr<v1::Job> job = controller_->views().GetJob(job_id);
  if (job.ok() && authorize_) {
    if (absl::Status s = authorize_(*job); !s.ok()) job = s;
  }
  absl::StatusOr<LogCursor> cursor = absl::UnknownError("not read");
  if (job.ok()) {
    query_.job_id = job_id;
    if (request_.has_rank()) query_.rank = request_.rank();
    if (request_.generation() > 0) {
      query_.min_generation = query_.max_generation = request_.generation();
    } else {
      query_.min_generation = job->generation();  // 0 before the first placement: nothing yet
      query_.max_generation = request_.follow() ? INT64_MAX : job->generation();
    }
    cursor = logs_->TailCursor(query_, request_.tail_lines());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!job.ok()) {
      finish_with_ = ToGrpcStatus(job.status());
    } else if (!cursor.ok()) {
      finish_with_ = ToGrpcStatus(cursor.status());
    } else {
      cursor_ = *std::move(cursor);
      if (IsTerminal(job->state())) JobOverLocked();
      started_ = true;
      dirty_ = true;
    }
  }
  Pump();
}

void StreamLogsReactor::ReadMore() {
  absl::StatusOr<v1::LogChunk> chunk = logs_->Read(query_, &cursor_, options_.chunk_lines, options_.chunk_bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    reading_ = false;
    if (!chunk.ok()) {
      if (!finish_with_.has_value()) finish_with_ = ToGrpcStatus(chunk.status());
    } else if (chunk->lines_size() > 0) {
      ready_ = *std::move(chunk);
      dirty_ = true;  // there may be more
    }
  }
  Pump();
}

void StreamLogsReactor::JobOverLocked() {
  if (job_over_) return;
  job_over_ = true;
  quiet_until_ = absl::Now() + options_.linger;
}

void StreamLogsReactor::OnAppend() {
  std::lock_guard<std::mutex> lock(mu_);
  dirty_ = true;
  if (job_over_) quiet_until_ = absl::Now() + options_.linger;
  PostPumpLocked();
}

void StreamLogsReactor::OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>&) {
  if (!IsTerminal(job.state())) return;
  std::lock_guard<std::mutex> lock(mu_);
  JobOverLocked();
  PostPumpLocked();
}

void StreamLogsReactor::OnClose(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!finish_with_.has_value()) finish_with_ = ToGrpcStatus(status);
  PostPumpLocked();
}

void StreamLogsReactor::PostPumpLocked() {
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

void StreamLogsReactor::Pump() {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_ || writing_) return;
  std::optional<grpc::Status> finish = finish_with_;
  if (!finish.has_value() && ready_.has_value()) {
    writing_chunk_ = std::move(*ready_);
    ready_.reset();
    writing_ = true;
    lock.unlock();
    StartWrite(&writing_chunk_);
    return;
  }
  if (!finish.has_value()) {
    if (!started_ || reading_) return;
    if (dirty_) {
      dirty_ = false;
      reading_ = true;
      if (!Post([this] { ReadMore(); })) {
        reading_ = false;
        finish = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
      }
    } else if (!request_.follow()) {
      finish = grpc::Status::OK;  // every stored line sent
    } else if (job_over_) {
      const absl::Time now = absl::Now();
      if (now >= quiet_until_) {
        finish = grpc::Status::OK;  // the job ended and its last lines are in
      } else if (!timer_posted_) {
        timer_posted_ = true;
        Post(
            [this] {
              {
                std::lock_guard<std::mutex> lock(mu_);
                timer_posted_ = false;
              }
              Pump();
            },
            quiet_until_ - now);
      }
    }
  }
  if (!finish.has_value()) return;
  finished_ = true;
  lock.unlock();
  Finish(*finish);
}

void StreamLogsReactor::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok && !finish_with_.has_value()) {
      finish_with_ = grpc::Status(grpc::StatusCode::CANCELLED, "the stream was closed");
    }
  }
  Pump();
}

void StreamLogsReactor::OnCancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finish_with_.has_value()) finish_with_ = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }
  Pump();
}

void StreamLogsReactor::OnDone() {
  int64_t watch, appends;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    watch = watch_subscription_;
    appends = log_subscription_;
    watch_subscription_ = log_subscription_ = 0;
  }
  if (watch != 0) watchers_->Unsubscribe(watch);
  if (appends != 0) logs_->Unsubscribe(appends);
  Unref();
}

}  // namespace ringmaster::coordinator
