#ifndef RINGMASTER_COORDINATOR_CORE_STRAGGLER_METRICS_H_
#define RINGMASTER_COORDINATOR_CORE_STRAGGLER_METRICS_H_

// StragglerMetrics: the Prometheus metrics of stragglers, from the jobs'
// STRAGGLER and STRAGGLER_RECOVERED events (job_lifecycle.h, "stragglers"):
//
//   ringmaster_job_straggler_ranks{job}          gauge: ranks of the job's current generation flagged as
//                                                stragglers now; for each non-terminal job (0 while it is
//                                                not RUNNING: a new generation starts unflagged)
//   ringmaster_straggler{job,rank,node}          gauge: 1 while that rank is flagged, else 0; for every
//                                                rank of each RUNNING job (the series leave when the
//                                                generation stops); what the RingmasterStraggler alert reads
//   ringmaster_stragglers_flagged_total          counter: ranks flagged since the coordinator started
//
// A restarted coordinator starts with no rank flagged (its detectors start
// over). Thread-safe: one internal mutex; the callbacks only update series.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "coordinator/core/job_types.h"

namespace ringmaster::coordinator {

class StragglerMetrics : public JobListener {
 public:
  static absl::StatusOr<std::unique_ptr<StragglerMetrics>> Create(MetricsRegistry* registry);

  void OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) override;
  void OnStartRanks(const StartOrder&) override {}
  void OnStopRanks(const StopOrder&) override {}

 private:
  StragglerMetrics() = default;
  struct Ranks {
    int64_t generation = 0;
    std::map<int32_t, prometheus::Gauge*> series;  // every rank of the RUNNING generation
    std::map<int32_t, bool> flagged;
  };
  // Installs a series per rank of the job's RUNNING generation (at 0), or
  // removes them when it is not RUNNING or a new generation began.
  void TrackRanksLocked(const v1::Job& job, Ranks& ranks);

  prometheus::Family<prometheus::Gauge>* ranks_ = nullptr;      // by job
  prometheus::Family<prometheus::Gauge>* flagged_ = nullptr;    // by job, rank, node
  prometheus::Counter* flagged_total_ = nullptr;

  std::mutex mu_;
  std::map<std::string, Ranks> jobs_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_STRAGGLER_METRICS_H_
