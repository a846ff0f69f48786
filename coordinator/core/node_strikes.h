#ifndef RINGMASTER_COORDINATOR_NODE_STRIKES_H_
#define RINGMASTER_COORDINATOR_NODE_STRIKES_H_

// NodeStrikes: for one job, the nodes its generations failed on (a rank there
// exited with an error, or the node was lost) and which of them are in a
// cool-down: a node with `limit` failures of the job within `cooldown` is
// excluded from the job's placements until `cooldown` after its last failure.
// In memory only (a coordinator restart forgets the strikes).
//
// Not thread-safe: the JobController's lock guards it.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster::coordinator {

struct NodeStrikePolicy {
  int limit = 2;  // failures of one job on one node; <= 0: never exclude
  absl::Duration cooldown = absl::Minutes(10);
};

class NodeStrikes {
 public:
  // Records a failure of the job on `node_id` at `now`; true when this one
  // starts the node's cool-down.
  bool Record(const std::string& node_id, absl::Time now, const NodeStrikePolicy& policy);
  // The nodes in their cool-down at `now`.
  std::set<std::string> Excluded(absl::Time now, const NodeStrikePolicy& policy) const;

 private:
  std::map<std::string, std::vector<absl::Time>> failures_;  // by node, oldest first
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_NODE_STRIKES_H_
