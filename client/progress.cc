#include "client/progress.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/output.h"

namespace ringmaster::client {

absl::Duration EstimateRemaining(const v1::Job& job) {
  const v1::StepMetrics& p = job.progress();
  if (p.total_steps() <= 0 || p.step() > p.total_steps()) return absl::InfiniteDuration();
  const double remaining_steps = static_cast<double>(p.total_steps() - p.step());
  if (p.step_time_seconds() > 0) return absl::Seconds(remaining_steps * p.step_time_seconds());
  const int batch = job.spec().data().batch_size();
  if (p.samples_per_second() > 0 && batch > 0) {
    return absl::Seconds(remaining_steps * batch / p.samples_per_second());
  }
  return absl::InfiniteDuration();
}

std::string FormatProgressLine(const v1::Job& job) {
  const v1::StepMetrics& p = job.progress();
  const bool reported = p.step() > 0 || p.total_steps() > 0;
  if (!reported || job.state() != v1::JOB_STATE_RUNNING) {
    std::string line = StateName(job.state());
    if (!job.message().empty()) absl::StrAppend(&line, ": ", job.message());
    if (p.step() > 0) absl::StrAppend(&line, " (step ", FormatProgressCell(p), ")");
    return line;
  }
  std::string line = absl::StrCat("step ", FormatProgressCell(p));
  absl::StrAppend(&line, absl::StrFormat("  loss %.4f", p.loss()));
  absl::StrAppend(&line, absl::StrFormat("  %.1f samples/s", p.samples_per_second()));
  if (p.loss_scale() > 0) absl::StrAppend(&line, absl::StrFormat("  loss scale %g", p.loss_scale()));
  const absl::Duration eta = EstimateRemaining(job);
  if (eta != absl::InfiniteDuration()) absl::StrAppend(&line, "  ETA ", FormatDurationShort(eta));
  return line;
}

std::string FormatFinalLine(const v1::Job& job, absl::Time now) {
  const v1::StepMetrics& p = job.progress();
  const absl::Time from = IsSet(job.start_time()) ? FromProto(job.start_time()) : FromProto(job.submit_time());
  const absl::Time to = IsSet(job.end_time()) ? FromProto(job.end_time()) : now;
  std::string line = absl::StrCat("job ", job.id(), " ", StateName(job.state()), " after ",
                                  FormatDurationShort(to - from));
  if (p.step() > 0 || p.total_steps() > 0) absl::StrAppend(&line, " at step ", FormatProgressCell(p));
  if (job.state() == v1::JOB_STATE_SUCCEEDED) {
    if (p.eval_step() > 0) {
      absl::StrAppend(&line, ";");
      if (p.eval_accuracy() > 0) absl::StrAppend(&line, absl::StrFormat(" test accuracy %.2f%%,", 100 * p.eval_accuracy()));
      absl::StrAppend(&line, absl::StrFormat(" test loss %.4f", p.eval_loss()));
    }
  } else if (!job.message().empty()) {
    absl::StrAppend(&line, ": ", job.message());
  }
  return line;
}

void ProgressPrinter::Clear() {
  if (tty_ && showing_) {
    out_ << "\r\x1b[K";
    showing_ = false;
  }
}

void ProgressPrinter::Update(const std::string& line) {
  if (line == current_) return;
  current_ = line;
  if (tty_) {
    out_ << "\r" << line << "\x1b[K";
    showing_ = true;
  } else {
    out_ << line << "\n";
  }
  out_.flush();
}

void ProgressPrinter::Note(const std::string& line) {
  Clear();
  out_ << line << "\n";
  if (tty_ && !current_.empty()) {
    out_ << current_ << "\x1b[K";
    showing_ = true;
  }
  out_.flush();
}

void ProgressPrinter::Finish() {
  if (tty_ && showing_) out_ << "\n";
  showing_ = false;
  out_.flush();
}

}  // namespace ringmaster::client
