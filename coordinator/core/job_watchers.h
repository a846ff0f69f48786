#ifndef RINGMASTER_COORDINATOR_JOB_WATCHERS_H_
#define RINGMASTER_COORDINATOR_JOB_WATCHERS_H_

// JobWatchers: hands every change of a job to the streams that watch it
// (WatchJob, StreamLogs -f). A JobListener of the JobController: its
// callbacks run under the job's lock, so a JobWatcher must only
// record the change and return (queue the work, never call gRPC there).
//
// Subscribe inside JobLifecycle::SnapshotJob's callback to receive exactly
// the changes after the snapshot.
//
// Thread-safe. Lock order: JobController -> JobWatchers -> a watcher's own
// lock. Callbacks run with this class's lock held, so Unsubscribe returns
// only once no callback of that watcher runs (the watcher may then be
// destroyed).

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/core/job_controller.h"

namespace ringmaster::coordinator {

class JobWatcher {
 public:
  virtual ~JobWatcher() = default;
  // The job after a change, with the events recorded with it (may be none).
  virtual void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) = 0;
  // The coordinator is stopping: end the stream with `status`. Called once.
  virtual void OnClose(const absl::Status& status) = 0;
};

class JobWatchers : public JobListener {
 public:
  // A subscription id (> 0); 0 once CloseAll ran (the watcher is not added).
  int64_t Subscribe(const std::string& job_id, JobWatcher* watcher);
  void Unsubscribe(int64_t id);
  // OnClose on every watcher; later Subscribe calls fail. For shutdown.
  void CloseAll(const absl::Status& status);
  size_t size() const;

  // JobListener
  void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) override;
  void OnStartRanks(const StartOrder&) override {}
  void OnStopRanks(const StopOrder&) override {}

 private:
  mutable std::mutex mu_;
  bool closed_ = false;
  int64_t next_id_ = 1;
  std::map<int64_t, std::pair<std::string, JobWatcher*>> watchers_;
  std::multimap<std::string, int64_t> by_job_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_JOB_WATCHERS_H_
