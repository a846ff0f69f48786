#include "common/checkpoint_interval.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/spec.h"

namespace ringmaster {

std::string HumanSeconds(double seconds) {
  if (seconds < 1) return absl::StrFormat("%.3gms", seconds * 1000);
  if (seconds < 60) return absl::StrFormat("%.3gs", seconds);
  return absl::FormatDuration(absl::Seconds(std::round(seconds)));
}

double EstimateMtbf(const FailureHistory& history, std::string* basis) {
  double mtbf = history.prior_seconds;
  *basis = "the prior (no failures seen)";
  if (history.job_failures > 0) {
    const double job = std::max(history.job_running_seconds, 1.0) / history.job_failures;
    if (job < mtbf) {
      mtbf = job;
      *basis = absl::StrCat("the job's ", history.job_failures, history.job_failures == 1 ? " failure" : " failures",
                            " in ", HumanSeconds(history.job_running_seconds), " of training");
    }
  }
  if (history.node_failures > 0) {
    const double nodes = history.window_seconds / history.node_failures;
    if (nodes < mtbf) {
      mtbf = nodes;
      *basis = absl::StrCat(history.node_failures, history.node_failures == 1 ? " failure" : " failures",
                            " on its nodes in the last ", HumanSeconds(history.window_seconds));
    }
  }
  return mtbf;
}

v1::AutoIntervalInputs MakeAutoIntervalInputs(const FailureHistory& history, double min_seconds,
                                              double max_seconds, double last_stall_seconds) {
  v1::AutoIntervalInputs inputs;
  std::string basis;
  inputs.set_mtbf_seconds(EstimateMtbf(history, &basis));
  inputs.set_mtbf_basis(basis);
  inputs.set_min_seconds(min_seconds);
  inputs.set_max_seconds(std::max(min_seconds, max_seconds));
  inputs.set_stall_seconds(std::max(0.0, last_stall_seconds));
  return inputs;
}

v1::CheckpointInterval ChooseAutoInterval(const v1::AutoIntervalInputs& inputs, double stall_seconds) {
  const double lo = inputs.min_seconds() > 0 ? inputs.min_seconds() : kDefaultIntervalMinSeconds;
  const double hi = std::max(lo, inputs.max_seconds() > 0 ? inputs.max_seconds() : kDefaultIntervalMaxSeconds);
  const double mtbf = inputs.mtbf_seconds() > 0 ? inputs.mtbf_seconds() : kDefaultMtbfPriorSeconds;
  const std::string basis = inputs.mtbf_basis().empty() ? "the prior (no failures seen)" : inputs.mtbf_basis();
  v1::CheckpointInterval out;
  if (stall_seconds <= 0) {
    out.set_seconds(lo);
    out.set_why(absl::StrCat("auto: the first checkpoint after the lower bound ", HumanSeconds(lo),
                             ", to measure its stall; MTBF ", HumanSeconds(mtbf), ": ", basis));
    return out;
  }
  const double optimum = std::sqrt(2 * stall_seconds * mtbf);
  const double chosen = std::clamp(optimum, lo, hi);
  out.set_seconds(chosen);
  std::string why = absl::StrCat("auto: sqrt(2 x ", HumanSeconds(stall_seconds), " stall x ", HumanSeconds(mtbf),
                                 " MTBF) = ", HumanSeconds(optimum), "; MTBF: ", basis);
  if (chosen > optimum) absl::StrAppend(&why, "; raised to the lower bound ", HumanSeconds(lo));
  if (chosen < optimum) absl::StrAppend(&why, "; cut to the upper bound ", HumanSeconds(hi));
  out.set_why(why);
  return out;
}

v1::CheckpointInterval IntervalInForce(const v1::CheckpointPolicy& policy, const v1::AutoIntervalInputs& inputs) {
  v1::CheckpointInterval out;
  if (policy.has_interval_seconds()) {
    out.set_seconds(policy.interval_seconds());
    out.set_why(absl::StrCat("checkpoint.interval_seconds ", policy.interval_seconds(), " (the spec)"));
  } else if (policy.has_interval_steps()) {
    out.set_steps(policy.interval_steps());
    out.set_why(policy.interval_steps() == 0
                    ? "checkpoint.interval_steps 0 (the spec): only at the end"
                    : absl::StrCat("checkpoint.interval_steps ", policy.interval_steps(), " (the spec)"));
  } else {
    out = ChooseAutoInterval(inputs, inputs.stall_seconds());
  }
  return out;
}

}  // namespace ringmaster
