#ifndef RINGMASTER_ENGINE_TRAIN_STEP_MEAN_H_
#define RINGMASTER_ENGINE_TRAIN_STEP_MEAN_H_

// StepMean: a rank's step, communication and data-wait times as the mean
// over its last `window` steps (the job's log interval), which is what its
// StepMetrics say they are ("over the last log interval", proto/job.proto).
// Why a mean: the AgentClient sends at most one report a second, carrying
// the latest step; the time of one sampled step misses a rank that stalls
// now and then (a straggler: a throttled CPU, a noisy neighbour, a SIGSTOP),
// whose stalls land in the steps between samples. The coordinator compares
// ranks on these (coordinator/core/straggler_detector.h).
//
// Not thread-safe: the training loop's on_step calls it.

#include <cstdint>
#include <deque>

#include "engine/train/trainer.h"

namespace ringmaster::engine {

class StepMean {
 public:
  explicit StepMean(int64_t window);

  // Adds `step`'s times; returns `step` with seconds, comm_seconds and
  // data_wait_seconds replaced by their means over the last `window` steps
  // (fewer at the start).
  StepReport Add(StepReport step);

 private:
  struct Times {
    double seconds = 0, comm = 0, data_wait = 0;
  };
  size_t window_;
  std::deque<Times> last_;  // newest at the back, at most window_
  Times sum_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_STEP_MEAN_H_
