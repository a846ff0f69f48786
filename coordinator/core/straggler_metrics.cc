#include "coordinator/core/straggler_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/core/job_state_machine.h"

namespace ringmaster::coordinator {

absl::StatusOr<std::unique_ptr<StragglerMetrics>> StragglerMetrics::Create(MetricsRegistry* registry) {
  std::unique_ptr<StragglerMetrics> m(new StragglerMetrics());
  ASSIGN_OR_RETURN(m->ranks_, registry->AddGauge("ringmaster_job_straggler_ranks",
                                                 "Ranks of the job's current generation flagged as stragglers"));
  ASSIGN_OR_RETURN(m->flagged_, registry->AddGauge("ringmaster_straggler",
                                                   "1 while the rank is flagged as a straggler (own work per step "
                                                   "above --straggler-factor x its peers' median), else 0"));
  ASSIGN_OR_RETURN(prometheus::Family<prometheus::Counter>* total,
                   registry->AddCounter("ringmaster_stragglers_flagged_total",
                                        "Ranks flagged as stragglers since the coordinator started"));
  m->flagged_total_ = &total->Add({});
  return m;
}

void StragglerMetrics::OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  if (job.id().empty()) return;  // validate_only
  std::lock_guard<std::mutex> lock(mu_);
  Ranks& ranks = jobs_[job.id()];
  TrackRanksLocked(job, ranks);
  for (const v1::JobEvent& e : events) {
    auto series = ranks.series.find(e.rank());
    if (series == ranks.series.end()) continue;  // not a rank of the RUNNING generation
    if (e.kind() == v1::JOB_EVENT_KIND_STRAGGLER && !ranks.flagged[e.rank()]) {
      ranks.flagged[e.rank()] = true;
      series->second->Set(1);
      flagged_total_->Increment();
    } else if (e.kind() == v1::JOB_EVENT_KIND_STRAGGLER_RECOVERED && ranks.flagged[e.rank()]) {
      ranks.flagged[e.rank()] = false;
      series->second->Set(0);
    }
  }
  prometheus::Gauge& count = ranks_->Add({{"job", job.id()}});
  if (IsTerminal(job.state())) {
    ranks_->Remove(&count);
    jobs_.erase(job.id());
    return;
  }
  int flagged = 0;
  for (const auto& [rank, on] : ranks.flagged) flagged += on ? 1 : 0;
  count.Set(flagged);
}

void StragglerMetrics::TrackRanksLocked(const v1::Job& job, Ranks& ranks) {
  const bool running = job.state() == v1::JOB_STATE_RUNNING;
  if (!running || ranks.generation != job.generation()) {
    for (const auto& [rank, gauge] : ranks.series) flagged_->Remove(gauge);
    ranks.series.clear();
    ranks.flagged.clear();
    ranks.generation = job.generation();
  }
  if (!running || !ranks.series.empty()) return;
  for (const v1::RankAssignment& r : job.placement().ranks()) {
    prometheus::Gauge& g = flagged_->Add({{"job", job.id()},
                                          {"rank", absl::StrCat(r.global_rank())},
                                          {"node", r.hostname().empty() ? r.node_id() : r.hostname()}});
    g.Set(0);
    ranks.series[r.global_rank()] = &g;
  }
}

}  // namespace ringmaster::coordinator
