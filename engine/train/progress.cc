#include "engine/train/progress.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::engine {
namespace {

// Weight of the newest step in the throughput average.
constexpr double kSmoothing = 0.1;

}  // namespace

std::string FormatEta(absl::Duration d) {
  int64_t s = absl::ToInt64Seconds(d);
  if (s < 0) s = 0;
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

ProgressPrinter::ProgressPrinter(FILE* out, bool terminal, int64_t log_interval)
    : out_(out), terminal_(terminal), log_interval_(log_interval > 0 ? log_interval : 50) {}

std::string ProgressPrinter::Line(const StepReport& step) const {
  std::string line = absl::StrFormat("step %d/%d epoch %d | loss %.4f", step.step, step.total_steps, step.epoch,
                                     step.loss);
  if (tokens_per_second_ > 0) {
    absl::StrAppendFormat(&line, " | %.0f tokens/s", tokens_per_second_);
  } else {
    absl::StrAppendFormat(&line, " | %.0f samples/s", samples_per_second_);
  }
  absl::StrAppendFormat(&line, " | lr %.3g", step.lr);
  if (step.loss_scale != 1.0f || step.skipped_total > 0) {
    absl::StrAppendFormat(&line, " | scale %g skipped %d", step.loss_scale, step.skipped_total);
  }
  double eta = step_seconds_ * static_cast<double>(step.total_steps - step.step);
  absl::StrAppend(&line, " | ETA ", FormatEta(absl::Seconds(eta)));
  return line;
}

void ProgressPrinter::OnStep(const StepReport& step) {
  double seconds = std::max(step.seconds, 1e-9);
  step_seconds_ = step_seconds_ == 0.0 ? seconds : (1 - kSmoothing) * step_seconds_ + kSmoothing * seconds;
  samples_per_second_ = step.samples / step_seconds_;
  tokens_per_second_ = step.tokens / step_seconds_;
  if (terminal_) {
    std::fprintf(out_, "\r\033[K%s", Line(step).c_str());
    line_open_ = true;
  } else if (step.step % log_interval_ == 0 || step.step == step.total_steps) {
    std::fprintf(out_, "%s\n", Line(step).c_str());
  }
  std::fflush(out_);
}

void ProgressPrinter::OnEval(const EvalReport& eval) {
  Finish();
  std::string line = absl::StrFormat("eval step %d: loss %.4f", eval.step, eval.loss);
  if (eval.accuracy >= 0) absl::StrAppendFormat(&line, " accuracy %.4f", eval.accuracy);
  absl::StrAppendFormat(&line, " (%d samples)", eval.samples);
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressPrinter::Finish() {
  if (line_open_) std::fprintf(out_, "\n");
  line_open_ = false;
}

}  // namespace ringmaster::engine
