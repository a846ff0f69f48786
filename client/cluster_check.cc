#include "client/cluster_check.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/rpc_errors.h"
#include "common/path_within.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

// The data roots the nodes that could take jobs registered; empty when none
// reported any (workers from before NodeInfo.data_roots).
std::vector<std::string> DataRoots(const v1::ListNodesResponse& nodes) {
  std::set<std::string> roots;
  for (const v1::NodeInfo& node : nodes.nodes()) {
    if (node.state() == v1::NODE_STATE_LOST) continue;
    roots.insert(node.data_roots().begin(), node.data_roots().end());
  }
  return {roots.begin(), roots.end()};
}

}  // namespace

ClusterVerdict CheckAgainstCluster(v1::JobService::StubInterface& stub, const GlobalOptions& global,
                                   const v1::JobSpec& sent, const v1::JobSpec& effective, absl::Duration timeout) {
  ClusterVerdict verdict;
  v1::SubmitJobRequest request;
  *request.mutable_spec() = sent;
  request.set_validate_only(true);
  v1::SubmitJobResponse response;
  grpc::ClientContext submit_context;
  SetTimeout(&submit_context, timeout);
  grpc::Status status = stub.Submit(&submit_context, request, &response);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    verdict.not_checked = DescribeRpcError(status, {global.coordinator, "Submit", "", timeout});
    return verdict;
  }
  verdict.checked = true;
  if (!status.ok()) {
    verdict.problems.push_back(
        absl::StrCat("the coordinator refuses it: ", DescribeRpcError(status, {global.coordinator, "Submit", "", timeout})));
    return verdict;
  }
  if (!response.job().unschedulable().empty()) {
    verdict.problems.push_back(
        absl::StrCat("no registered node could ever run it: ", response.job().unschedulable()));
  }
  const std::string& path = effective.data().path();
  if (path.empty()) return verdict;
  grpc::ClientContext nodes_context;
  SetTimeout(&nodes_context, timeout);
  v1::ListNodesResponse nodes;
  if (!stub.ListNodes(&nodes_context, v1::ListNodesRequest(), &nodes).ok()) return verdict;
  const std::vector<std::string> roots = DataRoots(nodes);
  if (!roots.empty() && !PathWithinAny(path, roots)) {
    verdict.problems.push_back(absl::StrCat(
        "data.path: ", path, " is outside the nodes' data roots (", absl::StrJoin(roots, ", "),
        "): move the data beneath one of them, or start the workers with --data-roots (ringmaster local up "
        "--data-roots DIR)"));
  }
  return verdict;
}

bool ReportClusterVerdict(const ClusterVerdict& verdict, const GlobalOptions& global, const std::string& severity,
                          Console& console) {
  if (!verdict.checked) {
    console.err << "ringmaster: not checked against a cluster: " << verdict.not_checked << "\n";
    return true;
  }
  for (const std::string& problem : verdict.problems) {
    console.err << "ringmaster: " << severity << ": cluster at " << global.coordinator << ": " << problem << "\n";
  }
  return verdict.problems.empty();
}

}  // namespace ringmaster::client
