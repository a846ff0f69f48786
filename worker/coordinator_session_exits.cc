// CoordinatorSession: exit reports (see the header): queued, and delivered
// by their own thread with retries across sessions.
#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/time/clock.h"
#include "common/proto_time.h"
#include "spdlog/spdlog.h"
#include "worker/coordinator_session.h"

namespace ringmaster::worker {
namespace {

// Errors after which retrying the same exit report cannot help.
bool Permanent(grpc::StatusCode code) {
  return code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::UNIMPLEMENTED || code == grpc::StatusCode::UNAUTHENTICATED;
}

}  // namespace

void CoordinatorSession::ReportExit(const RankExit& exit) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.erase(RankKey{exit.job_id, exit.generation, exit.global_rank});
  if (exits_.size() >= options_.max_pending_exits) {
    const RankExit& dropped = exits_.front();
    spdlog::error("too many exit reports pending: dropping the one of job {} generation {} rank {}", dropped.job_id,
                  dropped.generation, dropped.global_rank);
    exits_.pop_front();
  }
  exits_.push_back(exit);
  exits_cv_.notify_all();
}

void CoordinatorSession::ExitLoop() {
  Retry retry(clock_, options_.retry);
  std::unique_lock<std::mutex> lock(mu_);
  auto done = absl::MakeCleanup([&] {
    exit_thread_done_ = true;
    exits_cv_.notify_all();
  });
  while (true) {
    exits_cv_.wait(lock,
                   [&] { return exits_stopping_ || (!exits_.empty() && !node_id_.empty() && !registering_); });
    retry_exits_now_ = false;
    if (exits_.empty()) {
      if (exits_stopping_) return;
      continue;
    }
    if (exits_stopping_ && (node_id_.empty() || clock_->Now() >= exits_deadline_)) {
      spdlog::warn("{} exit report(s) not delivered to the coordinator", exits_.size());
      return;
    }
    const RankExit exit = exits_.front();
    v1::ReportRankExitRequest request;
    request.set_node_id(node_id_);
    request.set_job_id(exit.job_id);
    request.set_generation(exit.generation);
    request.set_global_rank(exit.global_rank);
    request.set_exit_code(exit.exit_code);
    request.set_signal(exit.signal);
    request.set_stopped_by_worker(exit.stopped_by_worker);
    request.set_stderr_tail(exit.log_tail);
    *request.mutable_time() = ToProtoTime(exit.time);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    exit_call_ = &context;
    lock.unlock();
    v1::ReportRankExitResponse response;
    grpc::Status status = stub_->ReportRankExit(&context, request, &response);
    lock.lock();
    exit_call_ = nullptr;
    exits_cv_.notify_all();
    if (status.ok() || Permanent(status.error_code())) {
      if (!status.ok()) {
        spdlog::error("the coordinator refused the exit report of job {} rank {}: {}", exit.job_id, exit.global_rank,
                      status.error_message());
      }
      if (!exits_.empty()) exits_.pop_front();
      retry.Reset();
      continue;
    }
    const absl::Duration delay = retry.NextDelay().value_or(options_.retry.max);
    spdlog::warn("cannot report the exit of job {} rank {} ({}): retrying in {}", exit.job_id, exit.global_rank,
                 status.error_message(), absl::FormatDuration(delay));
    // Until retry_at, or at once after a registration; Stop may bring the deadline closer.
    const absl::Time retry_at = clock_->Now() + delay;
    absl::Time until = std::min(retry_at, exits_deadline_);
    while (clock_->WaitUntil(lock, exits_cv_, until, [&] { return retry_exits_now_ || exits_deadline_ < until; }) &&
           !retry_exits_now_) {
      until = std::min(retry_at, exits_deadline_);
    }
  }
}

}  // namespace ringmaster::worker
