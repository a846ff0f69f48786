#ifndef RINGMASTER_ENGINE_TRAIN_CHECKPOINT_SCHEDULE_H_
#define RINGMASTER_ENGINE_TRAIN_CHECKPOINT_SCHEDULE_H_

// When the trainer writes its periodic checkpoints (checkpoint.interval_steps,
// interval_seconds, or interval auto: common/checkpoint_interval.h). Steps
// are a rule every rank evaluates alike; time is not (clocks and stalls
// differ), so a timed checkpoint is rank 0's decision, which the ranks agree
// on through the trainer's control collective every control interval. The
// final checkpoint and requested ones (a drain) are the trainer's own rule.
//
// Thread-compatible: the training thread owns it. Times are seconds on any
// monotonic clock the caller keeps.

#include <cstdint>
#include <string>

#include "proto/checkpoint.pb.h"

namespace ringmaster::engine {

class CheckpointSchedule {
 public:
  // Every `steps` steps (0: none), every `seconds` seconds (> 0), or auto
  // with the coordinator's `inputs` (a rank started by hand: the defaults).
  static CheckpointSchedule EverySteps(int64_t steps);
  static CheckpointSchedule EverySeconds(double seconds);
  static CheckpointSchedule Auto(const v1::AutoIntervalInputs& inputs);

  // Whether the schedule is in time (a decision of rank 0 agreed by all).
  bool timed() const { return seconds_ > 0; }
  // A step rule: due at this step.
  bool DueAtStep(int64_t step) const { return steps_ > 0 && step % steps_ == 0; }
  // A time rule: due `now` (the training started, or the last checkpoint
  // was taken, at Start/Checkpointed's time).
  bool DueAt(double now) const { return timed() && now - last_ >= seconds_; }

  // Training starts (or resumes) at `now`: the first interval counts from it.
  void Start(double now) { last_ = now; }
  // A checkpoint was taken at `now` with this training stall (seconds):
  // the next interval counts from it, and auto chooses the interval anew.
  void Checkpointed(double now, double stall_seconds);

  // The interval in force and why (Job.checkpoint_interval's words).
  const v1::CheckpointInterval& interval() const { return interval_; }

 private:
  int64_t steps_ = 0;
  double seconds_ = 0;
  bool auto_ = false;
  v1::AutoIntervalInputs inputs_;
  v1::CheckpointInterval interval_;
  double last_ = 0;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_CHECKPOINT_SCHEDULE_H_
