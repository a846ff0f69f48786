// ringmaster queues: each queue's quota, what it uses and borrows, its fair
// share and how many jobs run and wait in it.

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

// -1 (unlimited) as "-".
std::string Amount(int64_t v) { return v < 0 ? "-" : absl::StrCat(v); }

// "used/nominal" of one slot kind.
std::string UsedOf(int64_t used, int64_t nominal) { return absl::StrCat(used, "/", Amount(nominal)); }

std::string Borrowing(const v1::QueueInfo& q) {
  return absl::StrCat(q.borrowed().gpus(), " GPU, ", q.borrowed().cpu_slots(), " CPU (limit ",
                      q.unlimited_borrowing() ? "none"
                                              : absl::StrCat(Amount(q.borrowing_limit().gpus()), " GPU, ",
                                                             Amount(q.borrowing_limit().cpu_slots()), " CPU"),
                      ")");
}

}  // namespace

int RunQueues(JobStub& stub, const GlobalOptions& global, Console& console) {
  v1::ListQueuesResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.ListQueues(&context, v1::ListQueuesRequest(), &response);
  if (!status.ok()) return ReportRpcError(status, {global.coordinator, "ListQueues", "", global.rpc_timeout}, console.err);
  if (IsStructured(global.output)) {
    PrintMessage(response, global.output, console.out);
    return kExitOk;
  }
  // GPUS and CPUS are used/nominal ("-": no quota bound); USAGE is the
  // decayed fair-share usage in GPU-hours.
  Table table({"QUEUE", "GPUS", "CPUS", "BORROWED", "WEIGHT", "USAGE", "RUNNING", "WAITING", "MEMBERS"});
  for (const v1::QueueInfo& q : response.queues()) {
    table.AddRow({q.name(), UsedOf(q.used().gpus(), q.nominal().gpus()),
                  UsedOf(q.used().cpu_slots(), q.nominal().cpu_slots()), Borrowing(q), absl::StrFormat("%g", q.weight()),
                  absl::StrFormat("%.1f GPU-h", q.decayed_usage() / 3600), absl::StrCat(q.running_jobs()),
                  absl::StrCat(q.waiting_jobs()), q.members().empty() ? "-" : absl::StrJoin(q.members(), ",")});
  }
  table.Render(console.out);
  return kExitOk;
}

}  // namespace ringmaster::client
