// ringmaster submit FILE [--set k=v ...] [--wait | --follow]

#include <string>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "client/plan_command.h"
#include "client/output.h"
#include "client/progress.h"
#include "client/rpc_errors.h"
#include "client/watch.h"
#include "common/spec.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

std::string RandomRequestId() {
  absl::BitGen gen;
  return absl::StrFormat("cli-%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

std::string FormatEventLine(const v1::JobEvent& event) {
  std::string line = absl::StrCat(FormatTimestamp(event.time()), "  ", EventKindName(event.kind()));
  if (event.from_state() != event.to_state()) {
    absl::StrAppend(&line, " (", StateName(event.from_state()), " -> ", StateName(event.to_state()), ")");
  }
  if (!event.reason().empty()) absl::StrAppend(&line, ": ", event.reason());
  return line;
}

// Watches the submitted job to its end, showing what `options` asks for.
int WatchSubmitted(JobStub& stub, const GlobalOptions& global, const SubmitOptions& options, const std::string& job_id,
                   Console& console) {
  const bool json = global.output == OutputFormat::kJson;
  ProgressPrinter printer(console.out, console.out_is_tty);
  v1::WatchJobResponse last;
  WatchOutcome outcome = WatchToEnd(stub, global, job_id, [&](const v1::WatchJobResponse& update) {
    last = update;
    if (!options.follow) return;
    if (json) {
      PrintJsonLine(update, console.out);
      console.out.flush();
      return;
    }
    for (const v1::JobEvent& event : update.events()) printer.Note(FormatEventLine(event));
    if (!IsTerminal(update.job().state())) printer.Update(FormatProgressLine(update.job()));
  });
  printer.Finish();
  if (!outcome.status.ok()) {
    return ReportRpcError(outcome.status, {global.coordinator, outcome.rpc, job_id, absl::InfiniteDuration()},
                          console.err);
  }
  if (json && !options.follow) PrintJsonLine(last, console.out);
  const std::string final_line = FormatFinalLine(outcome.job, console.clock->Now());
  if (outcome.job.state() != v1::JOB_STATE_SUCCEEDED) {
    console.err << "ringmaster: " << final_line << "\n";
    return kExitJobFailed;
  }
  if (!json) console.out << final_line << "\n";
  return kExitOk;
}

}  // namespace

int RunSubmit(JobStub& stub, const GlobalOptions& global, const SubmitOptions& options, Console& console) {
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(options.file, options.overrides, !options.skip_local_validation);
  if (!spec.ok()) {
    console.err << "ringmaster: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  if (!options.skip_local_validation && !CheckFitBeforeSubmit(*spec, options.gpu, options.strict, console)) {
    return kExitUsage;
  }
  v1::SubmitJobRequest request;
  *request.mutable_spec() = *std::move(spec);
  request.set_request_id(options.request_id.empty() ? RandomRequestId() : options.request_id);
  v1::SubmitJobResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.Submit(&context, request, &response);
  if (!status.ok()) {
    return ReportRpcError(status, {global.coordinator, "Submit", "", global.rpc_timeout}, console.err);
  }
  for (const std::string& warning : response.warnings()) console.err << "ringmaster: warning: " << warning << "\n";
  if (global.output == OutputFormat::kJson) {
    PrintJsonLine(response, console.out);
  } else {
    console.out << response.job().id() << "\n";
  }
  console.out.flush();
  if (!options.wait && !options.follow) return kExitOk;
  return WatchSubmitted(stub, global, options, response.job().id(), console);
}

}  // namespace ringmaster::client
