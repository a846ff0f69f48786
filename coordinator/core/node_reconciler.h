#ifndef RINGMASTER_COORDINATOR_CORE_NODE_RECONCILER_H_
#define RINGMASTER_COORDINATOR_CORE_NODE_RECONCILER_H_

// NodeReconciler: what runs where. It keeps the coordinator's view of each
// node's rank processes in line with what the node's worker says:
//  * RegisterNode: a worker (re)registers with the rank processes it still
//    runs. Their slots are held from the registration on (before any
//    placement can see the node's capacity); ranks of generations that are
//    over get stop orders; ranks of a RUNNING generation placed there that
//    the worker no longer runs fail that generation.
//  * AssignmentsForNode: the start orders of every current generation placed
//    on a node, sent when its worker's session opens.
//  * HandleLostNodes: nodes whose lease ran out (NodeRegistry) release their
//    slots, and the generations placed there fail (no stop order goes to the
//    lost node). A loss that could not be applied is retried on the next call.
//
// Threading: thread-safe. `mu_` guards only the set of lost nodes still to
// handle and is never held during I/O or a call out; job state changes go
// through the JobLifecycle (its per-job locks), slots through the
// NodeRegistry.

#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/core/job_lifecycle.h"
#include "coordinator/core/job_types.h"
#include "coordinator/core/node_registry.h"
#include "proto/node.pb.h"

namespace ringmaster::coordinator {

class NodeReconciler {
 public:
  NodeReconciler(NodeRegistry* nodes, JobLifecycle* jobs, const JobControllerOptions& options);

  // `proof`: what the worker's call presented (NodeRegistry::Register).
  absl::StatusOr<NodeRegistrationResult> RegisterNode(const v1::NodeInfo& node,
                                                      const std::vector<RunningRank>& running,
                                                      bool worker_drains = false, const NodeProof* proof = nullptr);
  // What should run on a node now: a start order per current generation
  // placed there (sent when a worker's session opens; workers treat a start
  // order for ranks already running as done). `at_snapshot` is called with
  // the orders while every job's lock is held (listener rules apply), so
  // that a session attached inside it receives every later order after
  // these: a stop order of a generation can never be overtaken by that
  // generation's start order, and no start order is lost between the
  // snapshot and the attach.
  void AssignmentsForNode(const std::string& node_id,
                          const std::function<void(const std::vector<StartOrder>&)>& at_snapshot) const;
  void HandleLostNodes();

 private:
  NodeRegistry* nodes_;
  JobLifecycle* jobs_;
  const JobControllerOptions options_;

  std::mutex mu_;
  std::set<std::string> lost_nodes_;  // lost, not yet fully handled
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_CORE_NODE_RECONCILER_H_
