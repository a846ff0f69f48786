#ifndef RINGMASTER_COMMON_METRICS_PROMTOOL_H_
#define RINGMASTER_COMMON_METRICS_PROMTOOL_H_

// Test helper: runs Prometheus' own checker, `promtool check metrics`, on an
// exposition, so that tests prove what Prometheus accepts rather than what we
// believe it accepts. promtool comes from Debian's `prometheus` package
// (scripts/install-deps.sh test). Thread-compatible; the child process is
// always reaped before returning.

#include <string>

#include "absl/status/statusor.h"

namespace ringmaster {

struct PromtoolResult {
  // promtool's exit status: 0 clean, 3 lint problems, 1 unparsable input.
  int exit_code = -1;
  // stdout and stderr together; empty when the input is clean.
  std::string output;
};

// Feeds `exposition` to `promtool check metrics` on its stdin and waits for it.
// NOT_FOUND, with the command to install it, when promtool is on neither $PATH
// nor /usr/bin; INTERNAL if it cannot be started or dies from a signal.
absl::StatusOr<PromtoolResult> RunPromtoolCheckMetrics(const std::string& exposition);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_METRICS_PROMTOOL_H_
