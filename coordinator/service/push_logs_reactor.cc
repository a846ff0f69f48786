#include "coordinator/service/push_logs_reactor.h"

#include <utility>

#include "common/grpc_status.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {

PushLogsReactor::PushLogsReactor(LogStore* logs, Executor* executor, LogLinesCounter counter, std::string peer,
                                 Authorize authorize, std::function<void(PushLogsReactor*)> on_done)
    : logs_(logs),
      executor_(executor),
      counter_(std::move(counter)),
      peer_(std::move(peer)),
      authorize_(std::move(authorize)),
      on_done_(std::move(on_done)) {
  StartRead(&chunk_);
}

bool PushLogsReactor::Post(std::function<void()> task) {
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

void PushLogsReactor::Unref() {
  if (refs_.fetch_sub(1) == 1) delete this;
}

void PushLogsReactor::Close(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || finish_with_.has_value()) return;
  finish_with_ = ToGrpcStatus(status);
  Post([this] { MaybeFinish(); });
}

void PushLogsReactor::MaybeFinish() {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_ || busy_ || !finish_with_.has_value()) return;
  finished_ = true;
  const grpc::Status status = *finish_with_;
  lock.unlock();
  Finish(status);
}

void PushLogsReactor::OnReadDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {
      // The worker closed the stream, or went away, or we finished already.
      if (!finish_with_.has_value()) finish_with_ = grpc::Status::OK;
    } else if (!finish_with_.has_value()) {
      busy_ = true;
      if (!Post([this] { Append(); })) {
        busy_ = false;
        finish_with_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
      }
    }
  }
  MaybeFinish();
}

absl::Status PushLogsReactor::AuthorizeChunk(v1::LogChunk* kept, bool* all, int64_t* dropped) {
  constexpr size_t kMaxAllowed = 4096;  // bounds the cache on a long stream
  *all = true;
  *dropped = 0;
  if (!authorize_) return absl::UnauthenticatedError("no node credential");
  for (int i = 0; i < chunk_.lines_size(); ++i) {
    const v1::LogLine& line = chunk_.lines(i);
    auto key = std::make_tuple(line.job_id(), line.generation(), line.rank());
    absl::Status s =
        allowed_.count(key) > 0 ? absl::OkStatus() : authorize_(line.job_id(), line.generation(), line.rank());
    if (s.ok()) {
      if (allowed_.size() >= kMaxAllowed) allowed_.clear();
      allowed_.insert(std::move(key));
      if (!*all) *kept->add_lines() = line;
      continue;
    }
    if (s.code() != absl::StatusCode::kNotFound) return s;
    if (*all) {  // the lines so far pass: keep them
      *all = false;
      for (int k = 0; k < i; ++k) *kept->add_lines() = chunk_.lines(k);
    }
    ++*dropped;
  }
  return absl::OkStatus();
}

void PushLogsReactor::Append() {
  v1::LogChunk kept;
  bool all = true;
  int64_t dropped = 0;
  absl::Status authorized = AuthorizeChunk(&kept, &all, &dropped);
  absl::StatusOr<AppendResult> result =
      authorized.ok() ? logs_->Append(all ? chunk_ : kept) : absl::StatusOr<AppendResult>(authorized);
  if (result.ok()) result->invalid += dropped;
  chunk_.Clear();
  if (result.ok()) {
    if (counter_) counter_(*result);
    if (result->invalid > 0) spdlog::warn("logs from {}: {} invalid line(s) dropped", peer_, result->invalid);
  } else {
    spdlog::error("logs from {}: {}", peer_, result.status().ToString());
  }
  bool read_next = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!result.ok() && !finish_with_.has_value()) finish_with_ = ToGrpcStatus(result.status());
    read_next = !finish_with_.has_value();
    busy_ = read_next;  // until the read is started
  }
  if (read_next) {
    StartRead(&chunk_);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  MaybeFinish();
}

void PushLogsReactor::OnDone() {
  if (on_done_) on_done_(this);
  Unref();
}

}  // namespace ringmaster::coordinator
