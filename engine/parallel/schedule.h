#ifndef RINGMASTER_ENGINE_PARALLEL_SCHEDULE_H_
#define RINGMASTER_ENGINE_PARALLEL_SCHEDULE_H_

// Pipeline schedules as data: for stage s of P with m micro-batches, the
// ordered list of actions that stage runs in one training step (PipelineStage
// executes it). Pure functions; thread-safe.
//
// Actions: RecvActivation(i) (input of micro-batch i from stage s-1),
// Forward(i), SendActivation(i) (output to stage s+1), RecvGrad(i) (dL/d output
// from stage s+1), Backward(i), SendGrad(i) (dL/d input to stage s-1). The
// first stage has no RecvActivation/SendGrad, the last no SendActivation/
// RecvGrad (it computes the loss in Forward and starts Backward from it).
//
//  * GPipe: all m forwards in order, then all m backwards in order. Peak
//    in-flight activations (forwards whose backward has not run) = m.
//  * 1F1B: warm-up of w = min(P - s - 1, m) forwards, then m - w steady
//    steps of one forward and one backward, then a cool-down of w backwards.
//    Peak in-flight activations = min(P - s, m).
//
// Deadlock freedom: the send/recv order is chosen so that every schedule
// completes even when Send blocks until the peer's matching Recv (rendezvous
// transports), not only with buffered sends. In a 1F1B steady step the stage
// receives the gradient of micro-batch k BEFORE it sends the activation of
// micro-batch w + k (RecvAct, Forward, RecvGrad, SendAct, Backward, SendGrad):
// the textbook order (SendAct before RecvGrad) deadlocks two neighbours that
// both send first. With equal stage costs it has the same (ideal) bubble,
// (P - 1) / (m + P - 1) of the step.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::engine::parallel {

enum class ScheduleKind { kGpipe, kOneFOneB };

// "gpipe" | "1f1b"; INVALID_ARGUMENT otherwise.
absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view name);
const char* ScheduleKindName(ScheduleKind kind);

enum class ActionType { kRecvActivation, kForward, kSendActivation, kRecvGrad, kBackward, kSendGrad };

struct Action {
  ActionType type = ActionType::kForward;
  int micro_batch = 0;
  bool operator==(const Action& o) const { return type == o.type && micro_batch == o.micro_batch; }
  bool operator!=(const Action& o) const { return !(*this == o); }
};

// "RA3", "F3", "SA3", "RG3", "B3", "SG3".
std::string ActionString(const Action& action);
// The actions joined by spaces (test failure messages, logs).
std::string ScheduleString(const std::vector<Action>& actions);

// The actions of `stage` in [0, num_stages) for `num_micro_batches` >= 1.
// INVALID_ARGUMENT for out-of-range arguments.
absl::StatusOr<std::vector<Action>> BuildSchedule(ScheduleKind kind, int stage, int num_stages,
                                                  int num_micro_batches);

// The largest number of micro-batches whose Forward has run and whose
// Backward has not, over the schedule (the activations a stage keeps).
int PeakInFlight(const std::vector<Action>& actions);

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_SCHEDULE_H_
