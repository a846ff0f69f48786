#include "coordinator/core/straggler_detector.h"

#include <algorithm>
#include <vector>

namespace ringmaster::coordinator {

double StragglerDetector::OwnSeconds(const v1::StepMetrics& metrics) {
  return std::max(0.0, metrics.step_time_seconds() - metrics.communication_seconds());
}

std::optional<StragglerChange> StragglerDetector::Observe(int64_t generation, int32_t rank, int32_t stage,
                                                          const v1::StepMetrics& metrics,
                                                          const StragglerPolicy& policy) {
  if (!policy.enabled()) return std::nullopt;
  if (generation != generation_) {
    generation_ = generation;
    ranks_.clear();
  }
  Rank& r = ranks_[rank];
  const int64_t previous = r.step;
  if (previous >= 0 && metrics.step() <= previous) return std::nullopt;  // nothing new (a repeated report)
  r.stage = stage;
  r.step = metrics.step();
  r.own = OwnSeconds(metrics);
  const std::optional<double> median = PeerMedian(rank);
  if (!median.has_value()) return std::nullopt;
  const bool slow = r.own - *median >= kMinExcessSeconds && r.own >= policy.factor * *median;
  if (slow == r.flagged) {  // as it is flagged: no run towards a change
    r.run_since = -1;
    return std::nullopt;
  }
  // The report covers the steps after the rank's previous one.
  if (r.run_since < 0) r.run_since = previous >= 0 ? previous : r.step;
  if (r.step - r.run_since < policy.steps) return std::nullopt;
  r.flagged = slow;
  StragglerChange change{rank, slow, r.own / std::max(*median, 1e-9), r.run_since};
  r.run_since = -1;
  return change;
}

std::optional<double> StragglerDetector::PeerMedian(int32_t rank) const {
  const int32_t stage = ranks_.at(rank).stage;
  std::vector<double> own;
  for (const auto& [other, r] : ranks_) {
    if (other != rank && r.stage == stage && r.step >= 0) own.push_back(r.own);
  }
  if (own.empty()) return std::nullopt;
  std::sort(own.begin(), own.end());
  const size_t mid = own.size() / 2;
  return own.size() % 2 == 1 ? own[mid] : (own[mid - 1] + own[mid]) / 2;
}

bool StragglerDetector::Flagged(int32_t rank) const {
  auto it = ranks_.find(rank);
  return it != ranks_.end() && it->second.flagged;
}

int StragglerDetector::FlaggedCount() const {
  return static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](const auto& r) { return r.second.flagged; }));
}

}  // namespace ringmaster::coordinator
