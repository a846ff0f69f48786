// ringmaster usage: GPU-hours and CPU-slot-hours per user, queue or job,
// from the coordinator's record of every placement.

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/commands.h"
#include "common/proto_time.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

// "7d": whole days, which absl::ParseDuration does not know.
bool ParseDays(const std::string& text, absl::Duration* d) {
  int64_t days = 0;
  if (text.size() < 2 || text.back() != 'd' || !absl::SimpleAtoi(text.substr(0, text.size() - 1), &days)) {
    return false;
  }
  *d = absl::Hours(24) * days;
  return true;
}

std::string Hours(double seconds) { return absl::StrFormat("%.2f", seconds / 3600); }

}  // namespace

absl::StatusOr<absl::Time> ParseSince(const std::string& text, absl::Time now) {
  absl::Time t;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &t, &error)) return t;
  absl::Duration ago;
  if ((ParseDays(text, &ago) || absl::ParseDuration(text, &ago)) && ago > absl::ZeroDuration()) return now - ago;
  return absl::InvalidArgumentError(absl::StrCat(
      "--since: expected an RFC 3339 time (2026-11-01T00:00:00Z) or how long ago (90m, 24h, 7d), got \"", text,
      "\""));
}

int RunUsage(JobStub& stub, const GlobalOptions& global, const UsageOptions& options, Console& console) {
  v1::GetUsageRequest request;
  const std::string by = absl::AsciiStrToLower(options.by);
  if (by == "user") {
    request.set_by(v1::GetUsageRequest::GROUP_BY_USER);
  } else if (by == "queue") {
    request.set_by(v1::GetUsageRequest::GROUP_BY_QUEUE);
  } else if (by == "job") {
    request.set_by(v1::GetUsageRequest::GROUP_BY_JOB);
  } else {
    console.err << "ringmaster: --by: expected user, queue or job, got \"" << options.by << "\"\n";
    return kExitUsage;
  }
  if (!options.since.empty()) {
    absl::StatusOr<absl::Time> since = ParseSince(options.since, console.clock->Now());
    if (!since.ok()) {
      console.err << "ringmaster: " << since.status().message() << "\n";
      return kExitUsage;
    }
    *request.mutable_since() = ToProtoTime(*since);
  }
  v1::GetUsageResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.GetUsage(&context, request, &response);
  if (!status.ok()) return ReportRpcError(status, {global.coordinator, "GetUsage", "", global.rpc_timeout}, console.err);
  if (IsStructured(global.output)) {
    PrintMessage(response, global.output, console.out);
    return kExitOk;
  }
  Table table({"KEY", "GPU-HOURS", "CPU-SLOT-HOURS", "PLACEMENTS"});
  for (const v1::UsageRow& row : response.rows()) {
    table.AddRow({row.key(), Hours(row.gpu_seconds()), Hours(row.cpu_slot_seconds()), absl::StrCat(row.placements())});
  }
  if (global.output == OutputFormat::kCsv) {
    table.RenderCsv(console.out);
  } else {
    table.Render(console.out);
  }
  return kExitOk;
}

}  // namespace ringmaster::client
