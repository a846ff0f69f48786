// ringmaster checkpoints JOB.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
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
  if (IsStructured(global.output)) {
    PrintMessage(response, global.output, console.out);
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
