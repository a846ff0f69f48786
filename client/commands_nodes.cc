// ringmaster nodes [cordon|uncordon|drain NODE].

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/commands.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

std::set<std::string> JobsOn(const v1::NodeInfo& node) {
  std::set<std::string> jobs;
  for (const v1::NodeAllocation& a : node.allocations()) jobs.insert(a.job_id());
  return jobs;
}

std::string Jobs(const v1::NodeInfo& node) {
  const std::set<std::string> jobs = JobsOn(node);
  return jobs.empty() ? "-" : absl::StrJoin(jobs, ",");
}

// READY, CORDONED, DRAINING, NOT_READY, NOT_READY,DRAINING, LOST, LOST,CORDONED.
std::string State(const v1::NodeInfo& node) {
  if (node.state() == v1::NODE_STATE_LOST && !node.cordoned_by().empty()) return "LOST,CORDONED";
  if (node.state() == v1::NODE_STATE_NOT_READY) return node.draining() ? "NOT_READY,DRAINING" : "NOT_READY";
  if (node.state() != v1::NODE_STATE_LOST && node.draining()) return "DRAINING";
  return NodeStateName(node.state());
}

std::string Cordon(const v1::NodeInfo& node) {
  if (node.cordoned_by().empty()) return "-";
  return node.cordon_reason().empty() ? node.cordoned_by()
                                      : absl::StrCat(node.cordoned_by(), ": ", node.cordon_reason());
}

// The worker's health checks: "ok", the failing one, or "-" (LOST: unknown).
std::string Health(const v1::NodeInfo& node) {
  if (!node.not_ready_reason().empty()) return node.not_ready_reason();
  return node.state() == v1::NODE_STATE_LOST ? "-" : "ok";
}

std::string NodeName(const v1::NodeInfo& node) { return absl::StrCat(node.hostname(), " (", node.node_id(), ")"); }

int RpcFailed(const grpc::Status& status, const GlobalOptions& global, absl::string_view rpc, Console& console) {
  return ReportRpcError(status, {global.coordinator, rpc, "", global.rpc_timeout}, console.err);
}

// Every node, page by page (each page its own call and timeout), into one
// response; at most 1,000 pages (a million nodes).
grpc::Status FetchAllNodes(JobStub& stub, const GlobalOptions& global, v1::ListNodesResponse* all) {
  v1::ListNodesRequest request;
  for (int pages = 0; pages < 1000; ++pages) {
    v1::ListNodesResponse page;
    grpc::ClientContext context;
    SetTimeout(&context, global.rpc_timeout);
    grpc::Status status = stub.ListNodes(&context, request, &page);
    if (!status.ok()) return status;
    for (v1::NodeInfo& node : *page.mutable_nodes()) *all->add_nodes() = std::move(node);
    all->set_total_size(page.total_size());
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  return grpc::Status::OK;
}

// The node named `name` now (ListNodes, by id or hostname); nullopt with
// the error reported.
std::optional<v1::NodeInfo> FetchNode(JobStub& stub, const GlobalOptions& global, const std::string& node_id,
                                      Console& console, int* exit_code) {
  v1::ListNodesResponse response;
  grpc::Status status = FetchAllNodes(stub, global, &response);
  if (!status.ok()) {
    *exit_code = RpcFailed(status, global, "ListNodes", console);
    return std::nullopt;
  }
  for (const v1::NodeInfo& node : response.nodes()) {
    if (node.node_id() == node_id) return node;
  }
  console.err << "ringmaster: node " << node_id << " is no longer registered\n";
  *exit_code = kExitError;
  return std::nullopt;
}

}  // namespace

int RunNodes(JobStub& stub, const GlobalOptions& global, Console& console) {
  v1::ListNodesResponse response;
  grpc::Status status = FetchAllNodes(stub, global, &response);
  if (!status.ok()) return RpcFailed(status, global, "ListNodes", console);
  if (IsStructured(global.output)) {
    PrintMessage(response, global.output, console.out);
    return kExitOk;
  }
  // GPUS and CPUS are free/total.
  Table table(
      {"ID", "HOSTNAME", "ADDRESS", "STATE", "GPUS", "CPUS", "JOBS", "CORDONED", "LABELS", "VERSION", "HEALTH"});
  for (const v1::NodeInfo& node : response.nodes()) {
    table.AddRow({node.node_id(), node.hostname(), node.address().empty() ? "-" : node.address(), State(node),
                  absl::StrCat(node.free_gpus(), "/", node.gpus_size()),
                  absl::StrCat(node.free_cpu_slots(), "/", node.cpu_slots()), Jobs(node), Cordon(node),
                  FormatLabels(node.labels()), node.worker_version().empty() ? "-" : node.worker_version(),
                  Health(node)});
  }
  table.Render(console.out);
  return kExitOk;
}

int RunCordon(JobStub& stub, const GlobalOptions& global, const NodeCommandOptions& options, bool uncordon,
              Console& console) {
  v1::CordonNodeRequest request;
  request.set_node(options.node);
  request.set_uncordon(uncordon);
  request.set_reason(options.reason);
  v1::CordonNodeResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.CordonNode(&context, request, &response);
  if (!status.ok()) return RpcFailed(status, global, "CordonNode", console);
  if (IsStructured(global.output)) {
    PrintMessage(response, global.output, console.out);
    return kExitOk;
  }
  const v1::NodeInfo& node = response.node();
  if (uncordon) {
    console.out << "node " << NodeName(node) << " uncordoned: it takes new jobs\n";
  } else {
    const std::set<std::string> jobs = JobsOn(node);
    console.out << "node " << NodeName(node) << " cordoned: no new jobs"
                << (jobs.empty() ? std::string() : absl::StrCat("; ", jobs.size(), " job(s) keep running there"))
                << " (ringmaster nodes drain " << node.hostname() << " moves them)\n";
  }
  return kExitOk;
}

int RunDrain(JobStub& stub, const GlobalOptions& global, const NodeCommandOptions& options, Console& console) {
  v1::DrainNodeRequest request;
  request.set_node(options.node);
  request.set_reason(options.reason);
  v1::DrainNodeResponse response;
  {
    grpc::ClientContext context;
    SetTimeout(&context, global.rpc_timeout);
    grpc::Status status = stub.DrainNode(&context, request, &response);
    if (!status.ok()) return RpcFailed(status, global, "DrainNode", console);
  }
  const bool json = IsStructured(global.output);  // json or yaml
  if (json) PrintMessage(response, global.output, console.out);
  v1::NodeInfo node = response.node();
  const std::string name = NodeName(node);
  if (!json) {
    console.out << "draining node " << name << ": cordoned; "
                << (response.job_ids().empty()
                        ? std::string("no job to move")
                        : absl::StrCat(response.job_ids_size(), " job(s) checkpoint and move: ",
                                       absl::StrJoin(response.job_ids(), ", ")))
                << "\n";
  }
  if (!options.wait) return kExitOk;
  const absl::Time deadline = absl::Now() + options.timeout;
  std::set<std::string> left = JobsOn(node);
  while (node.draining() || !JobsOn(node).empty()) {
    if (absl::Now() >= deadline) {
      console.err << "ringmaster: node " << name << " is still draining after "
                  << absl::FormatDuration(options.timeout) << "; jobs there: " << Jobs(node)
                  << " (the coordinator goes on; `ringmaster nodes` shows it)\n";
      return kExitError;
    }
    absl::SleepFor(absl::Seconds(1));
    int exit_code = kExitOk;
    std::optional<v1::NodeInfo> now = FetchNode(stub, global, node.node_id(), console, &exit_code);
    if (!now.has_value()) return exit_code;
    node = *std::move(now);
    const std::set<std::string> on = JobsOn(node);
    for (const std::string& job : left) {
      if (on.count(job) == 0 && !json) console.out << "  " << job << " moved off " << node.hostname() << "\n";
    }
    left = on;
  }
  if (!json) {
    console.out << "node " << name << " drained: nothing runs there; it stays cordoned (ringmaster nodes uncordon "
                << node.hostname() << " to use it again)\n";
  }
  return kExitOk;
}

}  // namespace ringmaster::client
