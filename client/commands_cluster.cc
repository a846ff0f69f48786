// ringmaster nodes and ringmaster checkpoints JOB.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

std::string Labels(const google::protobuf::Map<std::string, std::string>& labels) {
  if (labels.empty()) return "-";
  std::vector<std::string> pairs;
  for (const auto& [key, value] : labels) pairs.push_back(absl::StrCat(key, "=", value));
  std::sort(pairs.begin(), pairs.end());  // Map iteration order is unspecified.
  return absl::StrJoin(pairs, ",");
}

std::string Jobs(const v1::NodeInfo& node) {
  if (node.allocations().empty()) return "-";
  std::vector<std::string> jobs;
  for (const v1::NodeAllocation& a : node.allocations()) jobs.push_back(a.job_id());
  return absl::StrJoin(jobs, ",");
}

}  // namespace

int RunNodes(JobStub& stub, const GlobalOptions& global, Console& console) {
  v1::ListNodesRequest request;
  v1::ListNodesResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.ListNodes(&context, request, &response);
  if (!status.ok()) {
    return ReportRpcError(status, {global.coordinator, "ListNodes", "", global.rpc_timeout}, console.err);
  }
  if (global.output == OutputFormat::kJson) {
    PrintJsonLine(response, console.out);
    return kExitOk;
  }
  // GPUS and CPUS are free/total.
  Table table({"ID", "HOSTNAME", "ADDRESS", "STATE", "GPUS", "CPUS", "JOBS", "LABELS", "VERSION"});
  for (const v1::NodeInfo& node : response.nodes()) {
    table.AddRow({node.node_id(), node.hostname(), node.address().empty() ? "-" : node.address(),
                  NodeStateName(node.state()), absl::StrCat(node.free_gpus(), "/", node.gpus_size()),
                  absl::StrCat(node.free_cpu_slots(), "/", node.cpu_slots()), Jobs(node), Labels(node.labels()),
                  node.worker_version().empty() ? "-" : node.worker_version()});
  }
  table.Render(console.out);
  return kExitOk;
}

int RunCheckpoints(JobStub& stub, const GlobalOptions& global, const CheckpointsOptions& options,
                   Console& console) {
  v1::ListCheckpointsRequest request;
  request.set_job_id(options.job_id);
  request.set_include_incomplete(options.include_incomplete);
  v1::ListCheckpointsResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.ListCheckpoints(&context, request, &response);
  if (!status.ok()) {
    return ReportRpcError(status, {global.coordinator, "ListCheckpoints", options.job_id, global.rpc_timeout},
                          console.err);
  }
  if (global.output == OutputFormat::kJson) {
    PrintJsonLine(response, console.out);
    return kExitOk;
  }
  Table table({"STEP", "GEN", "STATUS", "STAGES", "SIZE", "COMMITTED", "PATH"});
  std::vector<const v1::CheckpointInfo*> damaged;
  for (const v1::CheckpointInfo& c : response.checkpoints()) {
    std::string status = !c.complete() ? "incomplete" : c.damage().empty() ? "good" : "BAD";
    if (!c.damage().empty()) damaged.push_back(&c);
    // A whole-model checkpoint holds every stage in one shard.
    std::string stages = c.whole_model() ? absl::StrCat("all ", c.pipeline_stages())
                                         : absl::StrCat(c.shards_size(), "/", c.pipeline_stages());
    table.AddRow({absl::StrCat(c.step()), absl::StrCat(c.generation()), status, stages, FormatBytes(c.total_bytes()),
                  FormatTimestamp(c.commit_time()), c.path()});
  }
  table.Render(console.out);
  for (const v1::CheckpointInfo* c : damaged) {
    console.out << "step " << c->step() << " (generation " << c->generation() << ") is damaged, never resumed from: "
                << c->damage() << "\n";
  }
  return kExitOk;
}

}  // namespace ringmaster::client
