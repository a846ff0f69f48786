#ifndef RINGMASTER_CLIENT_PROGRESS_H_
#define RINGMASTER_CLIENT_PROGRESS_H_

// `submit --follow`: the live progress line and the final summary.
//
//   step 120/1000 (12%)  loss 0.4312  1234.5 samples/s  loss scale 65536  ETA 3m20s
//   job j-42 SUCCEEDED after 5m12s at step 1000/1000; test accuracy 89.12%, test loss 0.3012
//
// ProgressPrinter rewrites the line in place on a terminal ("\r", the line,
// then erase-to-end-of-line) and prints one line per change otherwise (logs,
// pipes). Thread-compatible.

#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "proto/job.pb.h"

namespace ringmaster::client {

// The live line for `job`: its state and message before it runs; then step
// and total, loss, samples/s, loss scale (fp16 only), ETA (when the step time
// or the throughput and batch size are known).
std::string FormatProgressLine(const v1::Job& job);

// Time left: (total - step) x step_time_seconds, or from samples/s and the
// spec's global batch size; absl::InfiniteDuration() when unknown.
absl::Duration EstimateRemaining(const v1::Job& job);

// The last line once the job is terminal: state, how long it ran (start or
// submission to end, or to `now` if the end is not recorded), the last step,
// and the last evaluation (accuracy only when reported, i.e. > 0). For FAILED
// and CANCELLED the job's message follows after a colon.
std::string FormatFinalLine(const v1::Job& job, absl::Time now);

class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool tty) : out_(out), tty_(tty) {}

  // Shows `line` as the current progress (skipped when unchanged).
  void Update(const std::string& line);
  // Prints a permanent line (an event) above the progress line.
  void Note(const std::string& line);
  // Ends the progress line (a newline on a terminal).
  void Finish();

 private:
  void Clear();

  std::ostream& out_;
  const bool tty_;
  std::string current_;
  bool showing_ = false;  // a progress line is on screen without a newline
};

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_PROGRESS_H_
