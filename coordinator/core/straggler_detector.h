#ifndef RINGMASTER_COORDINATOR_CORE_STRAGGLER_DETECTOR_H_
#define RINGMASTER_COORDINATOR_CORE_STRAGGLER_DETECTOR_H_

// StragglerDetector: for one job's current generation, which ranks are
// stragglers, from the step metrics its ranks report.
//
// What is compared. A rank's own work per step: step_time_seconds minus
// communication_seconds (data_wait_seconds stays in: a rank starved of input
// is a straggler too). Not the step time itself: in a data-parallel job the
// all-reduce makes every rank's step as long as the slowest one's; the fast
// ranks spend the difference waiting in the collective, which shows as their
// communication_seconds, so their own work stays short while the slow rank's
// does not. Each rank is compared with the median of its peers' latest own
// work (its peers: the other ranks of the same pipeline stage, which do the
// same work; stages of a pipeline legitimately differ). The rank itself is
// left out of the median, so that in a 2-rank job a rank twice as slow as
// the other measures 2.0, not 1.33.
//
// When. A rank is flagged once its reports have measured it at least
// `factor` times the median for `steps` training steps in a row (counted
// from the reports' step numbers: a report covering steps (a, b] counts
// b - a, whatever the report interval). A flagged rank is unflagged once it
// has stayed below the factor for `steps` steps in a row. Differences under
// kMinExcessSeconds per step are noise, never a straggler.
//
// Not thread-safe: the JobLifecycle's per-job lock guards it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "proto/job.pb.h"

namespace ringmaster::coordinator {

struct StragglerPolicy {
  double factor = 1.3;  // slower than the peers' median by this factor; <= 1: disabled
  int64_t steps = 50;   // for this many steps in a row; <= 0: disabled
  // A job that consents (restart.move_stragglers) moves off a straggler's
  // node at most once in this window, and keeps off that node for it.
  absl::Duration move_window = absl::Minutes(30);
  bool enabled() const { return factor > 1.0 && steps > 0; }
};

// A rank crossed the threshold (one way or the other) with this report.
struct StragglerChange {
  int32_t rank = -1;
  bool flagged = false;  // true: now a straggler; false: recovered
  double ratio = 0;      // its own work / its peers' median, as measured now
  int64_t since_step = 0;  // the step it has been slow (recovered) since
};

class StragglerDetector {
 public:
  // Per-step excess under this is timer noise (tiny CPU steps), never flagged.
  static constexpr double kMinExcessSeconds = 0.001;

  // A report of `rank` (pipeline stage `stage`) of generation `generation`.
  // A new generation forgets everything of the previous one. Returns the
  // change this report makes, if any.
  std::optional<StragglerChange> Observe(int64_t generation, int32_t rank, int32_t stage,
                                         const v1::StepMetrics& metrics, const StragglerPolicy& policy);
  // Whether `rank` is flagged now.
  bool Flagged(int32_t rank) const;
  int FlaggedCount() const;

  // A rank's own work per step: step time minus communication, >= 0.
  static double OwnSeconds(const v1::StepMetrics& metrics);

 private:
  struct Rank {
    int32_t stage = 0;
    int64_t step = -1;      // of its latest report; -1: none yet
    double own = 0;         // its latest own work per step, seconds
    int64_t run_since = -1;  // slow (or, flagged, recovered) since this step; -1: not
    bool flagged = false;
  };
  // The median of the latest own work of `rank`'s peers; nullopt without any.
  std::optional<double> PeerMedian(int32_t rank) const;

  int64_t generation_ = -1;
  std::map<int32_t, Rank> ranks_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_STRAGGLER_DETECTOR_H_
