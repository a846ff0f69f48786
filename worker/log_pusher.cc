#include "worker/log_pusher.h"

#include <algorithm>
#include <optional>

#include "spdlog/spdlog.h"

namespace ringmaster::worker {

LogPusher::LogPusher(std::shared_ptr<grpc::Channel> channel, LogShipper* shipper, std::function<std::string()> node_id,
                     RetryPolicy retry, absl::Duration refused_retry, Clock* clock)
    : stub_(v1::NodeService::NewStub(channel)),
      shipper_(shipper),
      node_id_(std::move(node_id)),
      retry_(retry),
      refused_retry_(refused_retry),
      clock_(clock) {}

LogPusher::~LogPusher() { Stop(absl::ZeroDuration()); }

void LogPusher::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || draining_) return;
  thread_ = std::thread([this] { Loop(); });
}

void LogPusher::Stop(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  draining_ = true;
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (!cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return done_; })) {
    abort_ = true;
    if (call_ != nullptr) call_->TryCancel();
    cv_.notify_all();
  }
  lock.unlock();
  thread_.join();
}

int64_t LogPusher::chunks_sent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chunks_sent_;
}

int64_t LogPusher::refusals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refusals_;
}

bool LogPusher::SleepFor(absl::Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  clock_->WaitUntil(lock, cv_, clock_->Now() + d, [&] { return draining_ || abort_; });
  return !draining_ && !abort_;
}

void LogPusher::Loop() {
  Retry retry(clock_, retry_);
  std::optional<v1::LogChunk> pending;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientWriter<v1::LogChunk>> stream;
  v1::PushLogsResponse response;
  auto close_stream = [&](bool graceful) {
    if (stream == nullptr) return grpc::Status::OK;
    if (graceful) stream->WritesDone();
    grpc::Status status = stream->Finish();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      spdlog::warn("the coordinator refuses this node's log lines ({}): trying again in {}; meanwhile they wait "
                   "in a bounded buffer, beyond which they are dropped and counted "
                   "(ringmaster_worker_log_lines_dropped_total)",
                   status.error_message(), absl::FormatDuration(refused_retry_));
    } else if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      spdlog::warn("log stream to the coordinator ended: {}", status.error_message());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      call_ = nullptr;
    }
    stream.reset();
    context.reset();
    return status;
  };
  while (true) {
    bool draining;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abort_) break;
      draining = draining_;
    }
    if (!pending.has_value()) {
      pending = shipper_->NextChunk(draining ? absl::ZeroDuration() : absl::Milliseconds(200));
      if (!pending.has_value()) {
        if (draining || shipper_->closed()) break;
        continue;
      }
    }
    if (stream == nullptr) {
      context = std::make_unique<grpc::ClientContext>();
      context->AddMetadata("ringmaster-node-id", node_id_());
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (abort_) break;
        call_ = context.get();
      }
      stream = stub_->PushLogs(context.get(), &response);
    }
    if (stream->Write(*pending)) {
      pending.reset();
      retry.Reset();
      std::lock_guard<std::mutex> lock(mu_);
      ++chunks_sent_;
      continue;
    }
    const grpc::Status ended = close_stream(/*graceful=*/false);
    if (draining) break;  // no retrying while stopping
    // The pusher never gives up (no deadline in the policy): lines wait in the shipper.
    absl::Duration wait = retry.NextDelay().value_or(retry_.max);
    if (ended.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      std::lock_guard<std::mutex> lock(mu_);
      ++refusals_;
      wait = std::max(wait, refused_retry_);
    }
    if (!SleepFor(wait)) continue;  // stopping: one last pass drains without retries
  }
  close_stream(/*graceful=*/true);
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  cv_.notify_all();
}

}  // namespace ringmaster::worker
