#include "engine/train/checkpoint_schedule.h"

#include "absl/strings/str_cat.h"
#include "common/checkpoint_interval.h"

namespace ringmaster::engine {

CheckpointSchedule CheckpointSchedule::EverySteps(int64_t steps) {
  CheckpointSchedule s;
  s.steps_ = steps > 0 ? steps : 0;
  v1::CheckpointPolicy policy;
  policy.set_interval_steps(s.steps_);
  s.interval_ = IntervalInForce(policy, {});
  return s;
}

CheckpointSchedule CheckpointSchedule::EverySeconds(double seconds) {
  CheckpointSchedule s;
  s.seconds_ = seconds;
  v1::CheckpointPolicy policy;
  policy.set_interval_seconds(seconds);
  s.interval_ = IntervalInForce(policy, {});
  return s;
}

CheckpointSchedule CheckpointSchedule::Auto(const v1::AutoIntervalInputs& inputs) {
  CheckpointSchedule s;
  s.auto_ = true;
  s.inputs_ = inputs;
  if (s.inputs_.mtbf_seconds() <= 0) {  // a rank started by hand: the coordinator's defaults
    s.inputs_ = MakeAutoIntervalInputs(FailureHistory{}, kDefaultIntervalMinSeconds, kDefaultIntervalMaxSeconds,
                                       inputs.stall_seconds());
  }
  s.interval_ = ChooseAutoInterval(s.inputs_, s.inputs_.stall_seconds());
  s.seconds_ = s.interval_.seconds();
  return s;
}

void CheckpointSchedule::Checkpointed(double now, double stall_seconds) {
  last_ = now;
  if (!auto_ || stall_seconds <= 0) return;
  interval_ = ChooseAutoInterval(inputs_, stall_seconds);
  interval_.set_stall_seconds(stall_seconds);
  seconds_ = interval_.seconds();
}

}  // namespace ringmaster::engine
