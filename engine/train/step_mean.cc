#include "engine/train/step_mean.h"

#include <algorithm>

namespace ringmaster::engine {

StepMean::StepMean(int64_t window) : window_(static_cast<size_t>(std::max<int64_t>(1, window))) {}

StepReport StepMean::Add(StepReport step) {
  last_.push_back({step.seconds, step.comm_seconds, step.data_wait_seconds});
  sum_.seconds += step.seconds;
  sum_.comm += step.comm_seconds;
  sum_.data_wait += step.data_wait_seconds;
  if (last_.size() > window_) {
    const Times& old = last_.front();
    sum_.seconds -= old.seconds;
    sum_.comm -= old.comm;
    sum_.data_wait -= old.data_wait;
    last_.pop_front();
  }
  const double n = static_cast<double>(last_.size());
  // max(0, ...): a running sum's rounding must not make a mean negative.
  step.seconds = std::max(0.0, sum_.seconds / n);
  step.comm_seconds = std::max(0.0, sum_.comm / n);
  step.data_wait_seconds = std::max(0.0, sum_.data_wait / n);
  return step;
}

}  // namespace ringmaster::engine
