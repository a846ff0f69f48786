// ringmaster submit FILE|- [--set k=v ...] [--wait | --follow], and
// ringmaster attach JOB: both follow a job with FollowJob (client/watch.h).

#include <istream>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cluster_check.h"
#include "client/commands.h"
#include "client/output.h"
#include "client/plan_command.h"
#include "client/rpc_errors.h"
#include "client/watch.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

std::string RandomRequestId() {
  absl::BitGen gen;
  return absl::StrFormat("cli-%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

// What `submit -` names the spec when it names itself nothing, and the prefix
// of errors about its content (as a file's path is).
constexpr char kStdinName[] = "stdin";
// As common/spec.cc bounds a spec file.
constexpr size_t kMaxSpecBytes = size_t{16} << 20;

absl::Status InStdin(const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(kStdinName, ": ", status.message()));
}

// `submit -`: the spec on `in`, read as ReadJobSpecFile reads a file (parse,
// overrides, name; no defaults), JSON when its first non-blank character is
// '{', else YAML; named "stdin" unless it or a --set names it.
// *written: the spec before the overrides.
absl::StatusOr<v1::JobSpec> ReadJobSpecStdin(std::istream* in, const std::vector<std::string>& overrides,
                                             v1::JobSpec* written) {
  if (in == nullptr) return absl::FailedPreconditionError("submit -: there is no standard input to read");
  std::string text;
  char buffer[1 << 16];
  while (in->read(buffer, sizeof buffer) || in->gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in->gcount()));
    if (text.size() > kMaxSpecBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(kStdinName, ": larger than ", kMaxSpecBytes >> 20, " MiB; not a job spec"));
    }
  }
  if (in->bad()) return absl::DataLossError("cannot read the job spec from standard input");
  const size_t first = text.find_first_not_of(" \t\r\n");
  const SpecFormat format = first != std::string::npos && text[first] == '{' ? SpecFormat::kJson : SpecFormat::kYaml;
  absl::StatusOr<v1::JobSpec> parsed = ParseJobSpec(text, format);
  if (!parsed.ok()) return InStdin(parsed.status());
  v1::JobSpec spec = *std::move(parsed);
  *written = spec;
  if (written->name().empty()) written->set_name(kStdinName);
  RETURN_IF_ERROR(ApplyOverrides(&spec, overrides));
  if (spec.name().empty()) spec.set_name(kStdinName);
  return spec;
}

}  // namespace

int RunSubmit(JobStub& stub, const GlobalOptions& global, const SubmitOptions& options, Console& console) {
  // Sent as written (the coordinator applies the defaults and keeps both, so
  // `describe` can say where each value came from); checked here completed.
  v1::JobSpec written;  // stdin's before the overrides (a file is read again)
  absl::StatusOr<v1::JobSpec> spec = options.file == "-" ? ReadJobSpecStdin(console.in, options.overrides, &written)
                                                         : ReadJobSpecFile(options.file, options.overrides);
  if (!spec.ok()) {
    console.err << "ringmaster: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  if (!options.skip_local_validation) {
    v1::JobSpec effective = *spec;
    ApplyDefaults(&effective);
    if (absl::Status valid = ValidateJobSpec(effective); !valid.ok()) {
      // Blame the file or the --set that made it invalid.
      const std::string origin = options.file == "-" ? kStdinName : options.file;
      if (options.file != "-") {
        absl::StatusOr<v1::JobSpec> file = ReadJobSpecFile(options.file);
        if (file.ok()) written = *std::move(file);
      }
      absl::Status blamed = ValidateOverridden(written, origin, options.overrides);
      console.err << "ringmaster: " << (blamed.ok() ? absl::StrCat(origin, ": ", valid.message()) : blamed.message())
                  << "\n";
      return kExitUsage;
    }
    if (!CheckFitBeforeSubmit(effective, options.gpu, options.strict, console)) return kExitUsage;
    if (options.strict &&
        !ReportClusterVerdict(CheckAgainstCluster(stub, global, *spec, effective), global, "error", console)) {
      return kExitUsage;
    }
  }
  v1::SubmitJobRequest request;
  *request.mutable_spec() = *std::move(spec);
  request.mutable_overrides()->Assign(options.overrides.begin(), options.overrides.end());
  request.set_request_id(options.request_id.empty() ? RandomRequestId() : options.request_id);
  v1::SubmitJobResponse response;
  grpc::ClientContext context;
  SetTimeout(&context, global.rpc_timeout);
  grpc::Status status = stub.Submit(&context, request, &response);
  if (!status.ok()) {
    return ReportRpcError(status, {global.coordinator, "Submit", "", global.rpc_timeout}, console.err);
  }
  for (const std::string& warning : response.warnings()) console.err << "ringmaster: warning: " << warning << "\n";
  if (IsStructured(global.output)) {
    PrintMessage(response, global.output, console.out);
  } else {
    console.out << response.job().id() << "\n";
  }
  console.out.flush();
  if (!options.wait && !options.follow) return kExitOk;
  return FollowJob(stub, global, response.job().id(), options.follow, console);
}

int RunAttach(JobStub& stub, const GlobalOptions& global, const std::string& job_id, Console& console) {
  return FollowJob(stub, global, job_id, /*show_progress=*/true, console);
}

}  // namespace ringmaster::client
