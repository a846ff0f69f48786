#ifndef RINGMASTER_CLIENT_CLUSTER_CHECK_H_
#define RINGMASTER_CLIENT_CLUSTER_CHECK_H_

// `validate` and `submit --strict` against the cluster, when a coordinator
// answers: whether any registered node could ever run the spec (the
// coordinator's own judgement, Job.unschedulable of a validate_only Submit:
// GPUs, CPU slots, device, node_selector, node count) and whether data.path
// lies in the data roots the nodes registered (NodeInfo.data_roots; a worker
// refuses a job reading elsewhere).

#include <string>
#include <vector>

#include "client/cli.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::client {

struct ClusterVerdict {
  bool checked = false;               // a coordinator answered
  std::string not_checked;            // why not, when !checked (one line)
  std::vector<std::string> problems;  // one line each; empty: the cluster can run it
};

// `sent`: the spec as submit sends it (overrides applied, no defaults);
// `effective`: with the defaults (its data.path is checked). Each call is
// bounded by `timeout`; an unreachable coordinator is !checked, not an error.
ClusterVerdict CheckAgainstCluster(v1::JobService::StubInterface& stub, const GlobalOptions& global,
                                   const v1::JobSpec& sent, const v1::JobSpec& effective,
                                   absl::Duration timeout = absl::Seconds(5));

// Prints the verdict on console.err ("checked against the cluster at ADDR:
// ..." lines; `severity` "error" or "warning" prefixes each problem); true
// when there is no problem.
bool ReportClusterVerdict(const ClusterVerdict& verdict, const GlobalOptions& global, const std::string& severity,
                          Console& console);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_CLUSTER_CHECK_H_
