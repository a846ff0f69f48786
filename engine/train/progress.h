#ifndef RINGMASTER_ENGINE_TRAIN_PROGRESS_H_
#define RINGMASTER_ENGINE_TRAIN_PROGRESS_H_

// The trainer's live progress line:
//   step 120/2811 epoch 1 | loss 0.4213 | 1234 samples/s | lr 0.0500 | ETA 1m32s
// On a terminal it is rewritten in place after every step; otherwise a line is
// printed every `log_interval` steps. Evaluations get a line of their own.
// Not thread-safe.

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/time.h"
#include "engine/train/trainer.h"

namespace ringmaster::engine {

// "1h02m", "3m05s", "42s".
std::string FormatEta(absl::Duration d);

class ProgressPrinter {
 public:
  ProgressPrinter(FILE* out, bool terminal, int64_t log_interval);

  void OnStep(const StepReport& step);
  void OnEval(const EvalReport& eval);
  // Ends an in-place line.
  void Finish();

  // The line for `step` with the current throughput estimate (for tests).
  std::string Line(const StepReport& step) const;

 private:
  FILE* out_;
  bool terminal_;
  int64_t log_interval_;
  bool line_open_ = false;
  // Exponential moving average of the step time, seconds.
  double step_seconds_ = 0.0;
  double samples_per_second_ = 0.0;
  double tokens_per_second_ = 0.0;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_PROGRESS_H_
