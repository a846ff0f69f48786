#include "coordinator/service/watch_job_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "coordinator/core/job_state_machine.h"
#include "coordinator/core/job_summary.h"

namespace ringmaster::coordinator {

WatchJobReactor::WatchJobReactor(const JobController* controller, JobWatchers* watchers, Executor* executor,
                                 const v1::WatchJobRequest& request,
                                 std::function<absl::Status(const v1::Job&)> authorize)
    : controller_(controller),
      watchers_(watchers),
      executor_(executor),
      request_(request),
      authorize_(std::move(authorize)) {
  if (request_.job_id().empty()) {
    finish_with_ = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id: must not be empty");
    Pump();
    return;
  }
  if (request_.after_sequence() < 0) {
    finish_with_ = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "after_sequence: must be >= 0");
    Pump();
    return;
  }
  // The snapshot reads the store: not on a gRPC thread.
  if (!Post([this] { Begin(); })) {
    finish_with_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
    Pump();
  }
}

bool WatchJobReactor::Post(std::function<void()> task) {
  refs_.fetch_add(1);
  if (executor_->Post([this, task = std::move(task)] {
        task();
        Unref();
      })) {
    return true;
  }
  refs_.fetch_sub(1);  // gRPC's reference is still held
  return false;
}

void WatchJobReactor::Unref() {
  if (refs_.fetch_sub(1) == 1) delete this;
}

void WatchJobReactor::Begin() {
  absl::Status status = controller_->lifecycle().SnapshotJob(
      request_.job_id(), request_.after_sequence(),
      [this](const v1::Job& job, const EventPage& page) {
        if (authorize_) {
          if (absl::Status s = authorize_(job); !s.ok()) {
            std::lock_guard<std::mutex> lock(mu_);
            finish_with_ = ToGrpcStatus(s);
            return;
          }
        }
        // Under the job's lock: no change can slip in before the
        // subscription.
        const int64_t id = watchers_->Subscribe(job.id(), this);
        std::unique_lock<std::mutex> lock(mu_);
        if (done_) {  // gRPC finished with us meanwhile (cancelled)
          lock.unlock();
          if (id != 0) watchers_->Unsubscribe(id);
          return;
        }
        subscription_ = id;
        last_sequence_ = request_.after_sequence();
        pending_.emplace();  // the first message goes out even without events
        pending_event_bytes_ = 0;
        AddLocked(job, page.events);
        if (page.more && pending_->events_size() > 0) {  // older ones than the snapshot's page
          pending_->set_older_events_page_token(absl::StrCat(pending_->events(0).sequence()));
        }
        if (id == 0 && !terminal_pending_) {
          finish_with_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down");
        }
      });
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    finish_with_ = ToGrpcStatus(status);
  }
  Pump();
}

void WatchJobReactor::AddLocked(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  if (terminal_pending_ || terminal_written_) return;  // the stream is complete
  if (!pending_.has_value()) {
    pending_.emplace();
    pending_event_bytes_ = 0;
  }
  *pending_->mutable_job() = job;
  AbridgeJob(pending_->mutable_job());  // only a job stored before the spec's limits
  for (const v1::JobEvent& e : events) {
    if (e.sequence() <= last_sequence_) continue;
    last_sequence_ = e.sequence();
    *pending_->add_events() = e;
    pending_event_bytes_ += e.ByteSizeLong();
  }
  // A reader that falls behind gets the newest events and a token for the rest.
  int drop = 0;
  while (pending_->events_size() - drop > kMaxWatchEvents ||
         (pending_event_bytes_ > kMaxWatchEventBytes && pending_->events_size() - drop > 1)) {
    pending_event_bytes_ -= pending_->events(drop).ByteSizeLong();
    ++drop;
  }
  if (drop > 0) {
    pending_->mutable_events()->DeleteSubrange(0, drop);
    pending_->set_older_events_page_token(absl::StrCat(pending_->events(0).sequence()));
  }
  terminal_pending_ = IsTerminal(job.state());
}

void WatchJobReactor::OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || finish_with_.has_value()) return;
  AddLocked(job, events);
  PostPumpLocked();
}

void WatchJobReactor::OnClose(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!finish_with_.has_value()) finish_with_ = ToGrpcStatus(status);
  PostPumpLocked();
}

void WatchJobReactor::PostPumpLocked() {
  if (pump_posted_ || writing_ || finished_) return;
  pump_posted_ = true;
  refs_.fetch_add(1);
  if (!executor_->Post([this] {
        {
          std::lock_guard<std::mutex> lock(mu_);
          pump_posted_ = false;
        }
        Pump();
        Unref();
      })) {
    pump_posted_ = false;
    refs_.fetch_sub(1);
  }
}

void WatchJobReactor::Pump() {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_ || writing_) return;
  if (finish_with_.has_value() || (terminal_written_ && !pending_.has_value())) {
    finished_ = true;
    grpc::Status status = finish_with_.value_or(grpc::Status::OK);
    lock.unlock();
    Finish(status);
    return;
  }
  if (!pending_.has_value()) return;  // wait for a change
  writing_message_ = std::move(*pending_);
  pending_.reset();
  if (terminal_pending_) {
    terminal_pending_ = false;
    terminal_written_ = true;
  }
  writing_ = true;
  lock.unlock();
  StartWrite(&writing_message_);
}

void WatchJobReactor::OnWriteDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok && !finish_with_.has_value()) {
      finish_with_ = grpc::Status(grpc::StatusCode::CANCELLED, "the stream was closed");
    }
  }
  Pump();
}

void WatchJobReactor::OnCancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finish_with_.has_value()) finish_with_ = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }
  Pump();
}

void WatchJobReactor::OnDone() {
  int64_t subscription;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    subscription = subscription_;
    subscription_ = 0;
  }
  if (subscription != 0) watchers_->Unsubscribe(subscription);
  Unref();
}

}  // namespace ringmaster::coordinator
