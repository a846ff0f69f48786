#ifndef RINGMASTER_COORDINATOR_NODE_QUARANTINE_H_
#define RINGMASTER_COORDINATOR_NODE_QUARANTINE_H_

// NodeQuarantine: across jobs, which nodes ranks of many distinct jobs failed
// on. A node where ranks of `jobs` distinct jobs failed within `window` is to
// be quarantined (the JobLifecycle cordons it, cordoned_by "coordinator")
// until an operator uncordons it, which Forget()s its history. Failures of
// one job count once however often it fails there (one buggy job is no sign
// of a sick node; NodeStrikes keeps that job off the node). Beside
// NodeStrikes, which is per job. In memory only (a coordinator restart
// forgets the history; the cordon itself is stored with the node).
//
// Thread-safe (one internal mutex): jobs fail under their own locks.

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "absl/time/time.h"

namespace ringmaster::coordinator {

// NodeInfo.cordoned_by of a node the coordinator quarantined.
inline constexpr char kCordonedByCoordinator[] = "coordinator";

struct QuarantinePolicy {
  int jobs = 3;  // distinct jobs with a failed rank on the node; <= 0: never quarantine
  absl::Duration window = absl::Hours(1);
};

class NodeQuarantine {
 public:
  // Records that a rank of `job_id` failed on `node_id` at `now`. Returns the
  // cordon reason when this failure brings the node to `policy.jobs` distinct
  // jobs within `policy.window` (once: later failures return nullopt until
  // Forget), naming the jobs.
  std::optional<std::string> Record(const std::string& node_id, const std::string& job_id, absl::Time now,
                                    const QuarantinePolicy& policy);
  // The node was uncordoned: its failures so far no longer count.
  void Forget(const std::string& node_id);

 private:
  std::mutex mu_;
  std::map<std::string, std::map<std::string, absl::Time>> failures_;  // node -> job -> its latest failure there
  std::set<std::string> quarantined_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_NODE_QUARANTINE_H_
