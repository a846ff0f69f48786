#include "engine/parallel/schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster::engine::parallel {
namespace {

// Appends the actions of one stage; knows which neighbours exist.
class ScheduleWriter {
 public:
  ScheduleWriter(int stage, int num_stages) : first_(stage == 0), last_(stage == num_stages - 1) {}

  void RecvActivation(int i) {
    if (!first_) Push(ActionType::kRecvActivation, i);
  }
  void Forward(int i) { Push(ActionType::kForward, i); }
  void SendActivation(int i) {
    if (!last_) Push(ActionType::kSendActivation, i);
  }
  void RecvGrad(int i) {
    if (!last_) Push(ActionType::kRecvGrad, i);
  }
  void Backward(int i) { Push(ActionType::kBackward, i); }
  void SendGrad(int i) {
    if (!first_) Push(ActionType::kSendGrad, i);
  }

  // Receive, compute, send: the whole forward (backward) of one micro-batch.
  void FullForward(int i) {
    RecvActivation(i);
    Forward(i);
    SendActivation(i);
  }
  void FullBackward(int i) {
    RecvGrad(i);
    Backward(i);
    SendGrad(i);
  }

  std::vector<Action> Take() { return std::move(actions_); }

 private:
  void Push(ActionType type, int i) { actions_.push_back(Action{type, i}); }

  bool first_, last_;
  std::vector<Action> actions_;
};

}  // namespace

absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view name) {
  if (name == "gpipe") return ScheduleKind::kGpipe;
  if (name == "1f1b") return ScheduleKind::kOneFOneB;
  return absl::InvalidArgumentError(absl::StrCat("pipeline schedule \"", name, "\": expected gpipe or 1f1b"));
}

const char* ScheduleKindName(ScheduleKind kind) { return kind == ScheduleKind::kGpipe ? "gpipe" : "1f1b"; }

std::string ActionString(const Action& action) {
  const char* prefix = "";
  switch (action.type) {
    case ActionType::kRecvActivation: prefix = "RA"; break;
    case ActionType::kForward: prefix = "F"; break;
    case ActionType::kSendActivation: prefix = "SA"; break;
    case ActionType::kRecvGrad: prefix = "RG"; break;
    case ActionType::kBackward: prefix = "B"; break;
    case ActionType::kSendGrad: prefix = "SG"; break;
  }
  return absl::StrCat(prefix, action.micro_batch);
}

std::string ScheduleString(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) absl::StrAppend(&out, out.empty() ? "" : " ", ActionString(a));
  return out;
}

absl::StatusOr<std::vector<Action>> BuildSchedule(ScheduleKind kind, int stage, int num_stages,
                                                  int num_micro_batches) {
  if (num_stages < 1 || stage < 0 || stage >= num_stages)
    return absl::InvalidArgumentError(absl::StrCat("pipeline schedule: stage ", stage, " of ", num_stages));
  if (num_micro_batches < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline schedule: micro-batches must be >= 1, got ", num_micro_batches));
  const int m = num_micro_batches;
  ScheduleWriter w(stage, num_stages);
  if (kind == ScheduleKind::kGpipe) {
    for (int i = 0; i < m; ++i) w.FullForward(i);
    for (int i = 0; i < m; ++i) w.FullBackward(i);
    return w.Take();
  }
  const int warmup = std::min(num_stages - stage - 1, m);
  for (int i = 0; i < warmup; ++i) w.FullForward(i);
  for (int k = 0; k < m - warmup; ++k) {
    const int f = warmup + k;
    // RecvGrad(k) before SendActivation(f): see the header (rendezvous safety).
    w.RecvActivation(f);
    w.Forward(f);
    w.RecvGrad(k);
    w.SendActivation(f);
    w.Backward(k);
    w.SendGrad(k);
  }
  for (int k = m - warmup; k < m; ++k) w.FullBackward(k);
  return w.Take();
}

int PeakInFlight(const std::vector<Action>& actions) {
  int in_flight = 0, peak = 0;
  for (const Action& a : actions) {
    if (a.type == ActionType::kForward) peak = std::max(peak, ++in_flight);
    if (a.type == ActionType::kBackward) --in_flight;
  }
  return peak;
}

}  // namespace ringmaster::engine::parallel
