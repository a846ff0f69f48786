#ifndef RINGMASTER_COORDINATOR_WATCH_JOB_REACTOR_H_
#define RINGMASTER_COORDINATOR_WATCH_JOB_REACTOR_H_

// WatchJobReactor: one JobService.WatchJob stream. Sends the job and the
// newest page of its events after `after_sequence` (one snapshot, taken on
// the executor), then the job again after every change with the events
// since the previous message, and finishes OK once it has sent a terminal
// job. Changes that arrive while a write is in flight are coalesced into one
// message (the latest job, the events in order), so a slow client costs one
// message of memory, not a queue: a message holds at most kMaxWatchEvents
// events and kMaxWatchEventBytes of them, the newest, and
// older_events_page_token names where the ones left out end (GetJob pages
// them). A job stored before the spec's limits is sent abridged (AbridgeJob).
//
// Threading: gRPC reactions, the executor and JobWatchers (under the
// controller's lock) call in; state is under mu_, and gRPC operations are
// started with no lock held (from reactions, or from a task posted to the
// executor, never from inside a JobWatcher callback). The reactor deletes
// itself when gRPC is done with it and no task of it is pending.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "coordinator/core/executor.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/job_watchers.h"
#include "grpcpp/grpcpp.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::coordinator {

class WatchJobReactor final : public grpc::ServerWriteReactor<v1::WatchJobResponse>, public JobWatcher {
 public:
  // `authorize` says whether the caller may read the job (empty: anyone
  // may); its error ends the stream before anything is sent.
  WatchJobReactor(const JobController* controller, JobWatchers* watchers, Executor* executor,
                  const v1::WatchJobRequest& request, std::function<absl::Status(const v1::Job&)> authorize = {});

  // JobWatcher (under the job's lock: record, post).
  void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) override;
  void OnClose(const absl::Status& status) override;

  // gRPC reactions.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Begin();
  // Starts the next write, or finishes; call with no lock held.
  void Pump();
  void PostPumpLocked();
  bool Post(std::function<void()> task);
  void Unref();
  // Folds a change into pending_, keeping it within the bounds above;
  // caller holds mu_.
  void AddLocked(const v1::Job& job, const std::vector<v1::JobEvent>& events);

  const JobController* const controller_;
  JobWatchers* const watchers_;
  Executor* const executor_;
  const v1::WatchJobRequest request_;
  const std::function<absl::Status(const v1::Job&)> authorize_;
  std::atomic<int> refs_{1};  // gRPC's, released in OnDone, + one per posted task

  std::mutex mu_;
  int64_t subscription_ = 0;
  int64_t last_sequence_ = 0;
  std::optional<v1::WatchJobResponse> pending_;
  size_t pending_event_bytes_ = 0;  // of pending_'s events
  v1::WatchJobResponse writing_message_;
  bool writing_ = false;
  bool pump_posted_ = false;
  bool terminal_pending_ = false;  // pending_ shows a terminal job: nothing follows it
  bool terminal_written_ = false;
  std::optional<grpc::Status> finish_with_;  // end now (cancelled, closed, failed)
  bool finished_ = false;
  bool done_ = false;  // OnDone ran
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_WATCH_JOB_REACTOR_H_
