#ifndef RINGMASTER_COORDINATOR_CORE_FAILURE_HISTORY_H_
#define RINGMASTER_COORDINATOR_CORE_FAILURE_HISTORY_H_

// What `checkpoint.interval: auto` needs from the coordinator
// (common/checkpoint_interval.h): the operator's bounds and prior, and the
// failures seen on each node over a window (NodeFailureLog), which with the
// job's own failures give its mean time between failures.

#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "common/checkpoint_interval.h"

namespace ringmaster::coordinator {

// The coordinator's --checkpoint-interval-min/-max, --checkpoint-mtbf-prior
// and --checkpoint-failure-window.
struct CheckpointIntervalPolicy {
  absl::Duration min = absl::Seconds(kDefaultIntervalMinSeconds);
  absl::Duration max = absl::Seconds(kDefaultIntervalMaxSeconds);
  absl::Duration mtbf_prior = absl::Seconds(kDefaultMtbfPriorSeconds);
  absl::Duration failure_window = absl::Seconds(kDefaultNodeFailureWindowSeconds);
};

// Rank failures (a rank exited with an error, a node was lost) by node, for
// the last window. In memory only: a coordinator restart forgets them (the
// estimate then falls back on the job's own failures and the prior).
// Thread-safe (one internal mutex): jobs fail under their own locks.
class NodeFailureLog {
 public:
  // A failure on `node_id` at `now`; forgets the node's failures older than
  // `window`.
  void Record(const std::string& node_id, absl::Time now, absl::Duration window);
  // Failures on any of `nodes` since `since`.
  int CountSince(const std::set<std::string>& nodes, absl::Time since) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::deque<absl::Time>> failures_;  // oldest first
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_FAILURE_HISTORY_H_
