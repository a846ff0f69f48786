#ifndef RINGMASTER_COORDINATOR_STREAM_LOGS_REACTOR_H_
#define RINGMASTER_COORDINATOR_STREAM_LOGS_REACTOR_H_

// StreamLogsReactor: one JobService.StreamLogs stream. Sends the stored
// lines (the last tail_lines per rank, or all), chunk by chunk, read from the
// LogStore on the executor (file I/O never runs on a gRPC thread); without
// `follow` it then finishes OK. With `follow` it keeps sending lines as
// workers push them (woken by LogStore appends) until the job is terminal
// and no line has arrived for `linger` (lines written just before the ranks
// exited arrive after the exit reports), or the client cancels.
//
// Generation 0 means the job's current generation, and with `follow` every
// later one too (a restarted job's new ranks appear in the stream).
//
// Threading: as WatchJobReactor: state under mu_, gRPC operations started
// with no lock held, from reactions or executor tasks; LogStore and
// JobWatchers callbacks only record and post. Deletes itself when gRPC is
// done and no task is pending.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/core/executor.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/job_watchers.h"
#include "coordinator/store/log_store.h"
#include "grpcpp/grpcpp.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::coordinator {

struct StreamLogsOptions {
  size_t chunk_lines = 256;
  size_t chunk_bytes = 256 << 10;
  absl::Duration linger = absl::Seconds(2);
};

class StreamLogsReactor final : public grpc::ServerWriteReactor<v1::LogChunk>, public JobWatcher {
 public:
  // `authorize` says whether the caller may read the job (empty: anyone
  // may); its error ends the stream before any line is sent.
  StreamLogsReactor(const JobController* controller, JobWatchers* watchers, LogStore* logs, Executor* executor,
                    const v1::StreamLogsRequest& request, StreamLogsOptions options,
                    std::function<absl::Status(const v1::Job&)> authorize = {});

  // JobWatcher (under the job's lock).
  void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) override;
  void OnClose(const absl::Status& status) override;

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Begin();
  void ReadMore();
  void OnAppend();
  void Pump();
  void PostPumpLocked();
  bool Post(std::function<void()> task, absl::Duration delay = absl::ZeroDuration());
  void Unref();
  void JobOverLocked();

  const JobController* const controller_;
  JobWatchers* const watchers_;
  LogStore* const logs_;
  Executor* const executor_;
  const v1::StreamLogsRequest request_;
  const StreamLogsOptions options_;
  const std::function<absl::Status(const v1::Job&)> authorize_;
  std::atomic<int> refs_{1};

  // Set by Begin, then used by one read at a time.
  LogQuery query_;
  LogCursor cursor_;

  std::mutex mu_;
  int64_t watch_subscription_ = 0;
  int64_t log_subscription_ = 0;
  bool started_ = false;  // Begin ran: reads may start
  bool dirty_ = true;     // there may be lines not read yet
  bool reading_ = false;
  std::optional<v1::LogChunk> ready_;  // read, not yet written
  v1::LogChunk writing_chunk_;
  bool writing_ = false;
  bool pump_posted_ = false;
  bool timer_posted_ = false;
  bool job_over_ = false;
  absl::Time quiet_until_ = absl::InfinitePast();  // job over: finish once nothing new came by then
  std::optional<grpc::Status> finish_with_;
  bool finished_ = false;
  bool done_ = false;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_STREAM_LOGS_REACTOR_H_
