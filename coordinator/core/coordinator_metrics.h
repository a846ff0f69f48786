#ifndef RINGMASTER_COORDINATOR_COORDINATOR_METRICS_H_
#define RINGMASTER_COORDINATOR_COORDINATOR_METRICS_H_

// CoordinatorMetrics: the coordinator's Prometheus metrics, prometheus-cpp
// families in a MetricsRegistry (served on /metrics by common/metrics_http):
//
//   ringmaster_jobs{state}                       gauge: jobs per state (queued, ..., cancelled)
//   ringmaster_queue_length                      gauge: jobs waiting for placement (QUEUED, and
//                                                RESTARTING jobs waiting for their next generation)
//   ringmaster_queue_wait_seconds                histogram: submit (or failed generation) -> placed
//   ringmaster_queue_oldest_wait_seconds         gauge: how long the longest-waiting job has waited
//                                                so far (0: none waits); what a queue-wait alert reads,
//                                                since the histogram only learns of a wait once it ends
//   ringmaster_job_state{job,state}              gauge: 1 for each non-terminal job's state (the
//                                                dashboards' job list); terminal jobs leave it
//   ringmaster_job_unschedulable{job}            gauge: 1 while a job waits and no registered node
//                                                could ever run it (Job.unschedulable), else 0; for
//                                                each non-terminal job
//   ringmaster_job_goodput_ratio{job}            gauge: kept training time / time since first placement
//                                                (Job.goodput); for each non-terminal job that was placed
//   ringmaster_job_time_seconds{job,phase}       gauge: the job's wall time so far by phase (queued, starting,
//                                                training, checkpoint_stall, restart, recomputed); for each
//                                                non-terminal job; both leave when the job ends
//   ringmaster_jobs_ended_total{state}           counter: jobs that ended (succeeded, failed,
//                                                cancelled), what a job-failed alert reads
//   ringmaster_nodes{state}                      gauge: nodes per state (ready, cordoned, lost)
//   ringmaster_gpus{state}                       gauge: GPUs allocated (held by ranks), free (on
//                                                READY nodes), unavailable (CORDONED/LOST nodes)
//   ringmaster_cpu_slots{state}                  gauge: CPU slots, the same states
//   ringmaster_node_sessions                     gauge: workers with an open Session stream
//   ringmaster_scheduling_latency_seconds        histogram: one scheduling pass over a non-empty queue
//   ringmaster_rendezvous_duration_seconds       histogram: start orders sent -> every rank joined
//   ringmaster_job_restarts_total{reason}        counter: generations restarted, by cause
//                                                (RankExited, NodeLost, NodeDrained, ...;
//                                                every cause is exposed from the start, at 0)
//   ringmaster_rpc_latency_seconds{method}       histogram: unary RPCs, handler start -> status sent
//   ringmaster_rpcs_total{method,code}           counter: RPCs finished, by status code
//   ringmaster_log_lines_total{result}           counter: pushed log lines (stored, duplicate, invalid)
//   ringmaster_queue_gpu_seconds_total{queue}    counter: GPU-seconds held by the queue's jobs, from the
//                                                store's placements (SetQueueUsage: running ones up to
//                                                the last refresh); it continues across restarts
//   ringmaster_queue_cpu_slot_seconds_total{queue}
//                                                counter: CPU-slot-seconds, the same
//   ringmaster_coordinator_disk_free_bytes       gauge: free bytes on the state directory's filesystem
//   ringmaster_coordinator_disk_reserve_bytes    gauge: the reserve kept there (--disk-reserve)
//   ringmaster_coordinator_disk_low              gauge: 1 while free < reserve (new log lines refused)
//   ringmaster_coordinator_log_bytes{job}        gauge: bytes of a job's stored logs (<= --log-quota-per-job)
//   ringmaster_coordinator_logs_dropped_total{job,reason}
//                                                counter: log lines dropped: "quota" (the job's oldest, to
//                                                make room), "disk_low" (refused under the reserve)
//
// Job metrics come from JobListener::OnJobChanged (event times, the
// coordinator's clock, which also times the oldest wait); node metrics are read from the NodeRegistry when
// scraped (cached for 100 ms, so one scrape lists the nodes once).
//
// Thread-safe. The JobListener callbacks only update atomics and a map under
// this class's own lock (no calls out).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/store/disk_space.h"
#include "coordinator/store/log_store.h"
#include "coordinator/store/store.h"

namespace ringmaster::coordinator {

class CoordinatorMetrics : public JobListener, public LogStoreListener {
 public:
  // Registers the families. `nodes` must outlive the registry's scrapes.
  // `clock` (nullptr: the real one) must be the JobController's.
  static absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> Create(MetricsRegistry* registry,
                                                                    const NodeRegistry* nodes,
                                                                    const Clock* clock = nullptr);

  // The jobs as they are after JobController::Recover (before traffic).
  void Seed(const std::vector<v1::Job>& jobs);
  // The open sessions' count, read at scrape time.
  void SetSessionCount(std::function<size_t()> count);

  // Schedule pass duration (JobControllerOptions::on_schedule_pass).
  void ObserveSchedulingPass(absl::Duration d);
  // A finished RPC ("JobService/Submit", "OK"); latency only for unary ones.
  void ObserveRpc(const std::string& method, const std::string& code, absl::Duration latency, bool unary);
  // Log lines PushLogs handled.
  void CountLogLines(int64_t stored, int64_t duplicates, int64_t invalid);
  // The queues' usage since the store began (Accounting::QueueTotals): the
  // queue counters advance to these totals, never back (a total that
  // shrinks leaves its counter where it is). A restarted coordinator starts
  // them at the stored totals, so Prometheus sees no reset.
  void SetQueueUsage(const std::vector<UsageTotal>& totals);
  // The disk gauges read `reserve` (not owned; it must outlive the scrapes)
  // when scraped.
  void SetDiskReserve(const DiskReserve* reserve);

  // LogStoreListener (under the LogStore's lock, which orders these calls).
  void OnJobLogBytes(const std::string& job_id, int64_t bytes) override;
  void OnLinesDropped(const std::string& job_id, const std::string& reason, int64_t lines) override;
  void OnJobDeleted(const std::string& job_id) override;

  // JobListener
  void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) override;
  void OnStartRanks(const StartOrder&) override {}
  void OnStopRanks(const StopOrder&) override {}

 private:
  struct NodeCounts {
    double nodes[4] = {0, 0, 0, 0};   // ready, cordoned, lost, not_ready
    double gpus[3] = {0, 0, 0};       // allocated, free, unavailable
    double cpu_slots[3] = {0, 0, 0};  // allocated, free, unavailable
  };
  struct JobTrack {
    v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
    absl::Time waiting_since = absl::InfinitePast();   // queued (again) at; InfinitePast: unknown
    absl::Time starting_since = absl::InfinitePast();  // start orders sent at
    v1::GoodputBreakdown goodput;  // Job.goodput as last announced
    bool goodput_series = false;   // its series are installed
  };

  CoordinatorMetrics(MetricsRegistry* registry, const NodeRegistry* nodes, const Clock* clock)
      : registry_(registry), nodes_(nodes), clock_(clock) {}
  absl::Status Register();
  NodeCounts Counts();
  void SetStateLocked(const std::string& job_id, JobTrack& track, v1::JobState state);
  void SetUnschedulableLocked(const std::string& job_id, const v1::Job& job);
  double OldestWaitSeconds();
  // Notes the job's breakdown; returns +1 when its goodput series must be
  // installed, -1 removed, 0 neither. The caller does that with mu_ released
  // (a scrape calls the series' callbacks, which take mu_).
  int TrackGoodputLocked(JobTrack& track, const v1::Job& job);
  // OnJobChanged's work, under mu_ (it takes it); returns TrackGoodputLocked's answer.
  int UpdateJob(const v1::Job& job, const std::vector<v1::JobEvent>& events);
  void InstallGoodputSeries(const std::string& job_id, int change);
  double GoodputValue(const std::string& job_id, int phase);

  MetricsRegistry* const registry_;
  const NodeRegistry* const nodes_;
  const Clock* const clock_;

  // prometheus-cpp families and series (the registry owns them).
  std::map<v1::JobState, prometheus::Gauge*> jobs_by_state_;
  prometheus::Gauge* queue_length_ = nullptr;
  prometheus::Histogram* queue_wait_ = nullptr;
  prometheus::Histogram* scheduling_latency_ = nullptr;
  prometheus::Histogram* rendezvous_duration_ = nullptr;
  prometheus::Family<prometheus::Counter>* restarts_ = nullptr;
  prometheus::Family<prometheus::Gauge>* job_state_ = nullptr;  // series added and removed under mu_
  prometheus::Family<prometheus::Gauge>* unschedulable_ = nullptr;  // the same
  std::map<v1::JobState, prometheus::Counter*> jobs_ended_;
  prometheus::Family<prometheus::Histogram>* rpc_latency_ = nullptr;
  prometheus::Family<prometheus::Counter>* rpcs_ = nullptr;
  prometheus::Counter* log_stored_ = nullptr;
  prometheus::Counter* log_duplicate_ = nullptr;
  prometheus::Counter* log_invalid_ = nullptr;
  prometheus::Family<prometheus::Gauge>* log_bytes_ = nullptr;      // series touched by LogStoreListener only
  prometheus::Family<prometheus::Counter>* logs_dropped_ = nullptr;  // the same
  prometheus::Family<prometheus::Counter>* queue_gpu_seconds_ = nullptr;       // series added by SetQueueUsage
  prometheus::Family<prometheus::Counter>* queue_cpu_slot_seconds_ = nullptr;  // the same
  std::mutex usage_mu_;  // SetQueueUsage
  CallbackGauges* disk_free_ = nullptr;
  CallbackGauges* disk_reserve_ = nullptr;
  CallbackGauges* disk_low_ = nullptr;
  CallbackGauges* sessions_ = nullptr;
  CallbackGauges* goodput_ratio_ = nullptr;  // series set with mu_ released
  CallbackGauges* job_time_ = nullptr;       // the same

  std::mutex mu_;  // jobs_
  std::map<std::string, JobTrack> jobs_;

  std::mutex counts_mu_;
  NodeCounts counts_;
  absl::Time counts_at_ = absl::InfinitePast();
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_COORDINATOR_METRICS_H_
