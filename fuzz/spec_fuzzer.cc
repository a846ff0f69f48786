// libFuzzer target: job spec loading (common/spec.h), the path a spec file
// and the CLI's --set take: ParseJobSpec (YAML or JSON) -> ApplyOverride ->
// ApplyDefaults -> ValidateJobSpec, and LoadJobSpecFile on the same bytes.
//
// Input: [format: 1 byte (bit 0: JSON)][document][\0 override]...
// Properties: no crash or sanitizer report; every rejection is
// INVALID_ARGUMENT; a failed ApplyOverride leaves the spec unchanged;
// ApplyDefaults is idempotent; LoadJobSpecFile agrees with the steps done
// one by one.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/spec.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/util/message_differencer.h"

namespace {

using ringmaster::SpecFormat;
using ringmaster::v1::JobSpec;

bool Same(const JobSpec& a, const JobSpec& b) { return google::protobuf::util::MessageDifferencer::Equals(a, b); }

void CheckRejection(const absl::Status& status, const char* step) {
  FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, step, " rejected with ", status.ToString());
}

// Where LoadJobSpecFile reads from: one file per process and format.
std::string SpecPath(SpecFormat format) {
  static const std::string dir = [] {
    char pattern[] = "/tmp/rm-fuzz-spec-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    FUZZ_CHECK(made != nullptr, "mkdtemp failed");
    return std::string(made);
  }();
  return dir + (format == SpecFormat::kJson ? "/job.json" : "/job.yaml");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const SpecFormat format = (data[0] & 1) != 0 ? SpecFormat::kJson : SpecFormat::kYaml;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view document = rest.substr(0, nul);
  std::vector<std::string> overrides;
  for (size_t at = nul; at != std::string_view::npos;) {
    const size_t next = rest.find('\0', at + 1);
    overrides.emplace_back(rest.substr(at + 1, next == std::string_view::npos ? next : next - at - 1));
    at = next;
  }

  // The steps one by one.
  absl::Status steps = absl::OkStatus();
  JobSpec spec;
  if (absl::StatusOr<JobSpec> parsed = ringmaster::ParseJobSpec(document, format); parsed.ok()) {
    spec = *std::move(parsed);
    for (const std::string& assignment : overrides) {
      const JobSpec before = spec;
      absl::Status s = ringmaster::ApplyOverride(&spec, assignment);
      if (!s.ok()) {
        CheckRejection(s, "ApplyOverride");
        FUZZ_CHECK(Same(spec, before), "a failed ApplyOverride changed the spec: ", s.ToString());
        if (steps.ok()) steps = s;
      }
    }
    if (steps.ok()) {
      if (spec.name().empty()) spec.set_name("job");  // as LoadJobSpecFile names it
      ringmaster::ApplyDefaults(&spec);
      JobSpec again = spec;
      ringmaster::ApplyDefaults(&again);
      FUZZ_CHECK(Same(spec, again), "ApplyDefaults is not idempotent");
      steps = ringmaster::ValidateJobSpec(spec);
      if (!steps.ok()) CheckRejection(steps, "ValidateJobSpec");
      (void)ringmaster::ModelBlockCount(spec.model());
    }
  } else {
    CheckRejection(parsed.status(), "ParseJobSpec");
    steps = parsed.status();
  }

  // The same through the file.
  const std::string path = SpecPath(format);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(document.data(), static_cast<std::streamsize>(document.size()));
  }
  absl::StatusOr<JobSpec> loaded = ringmaster::LoadJobSpecFile(path, overrides);
  FUZZ_CHECK(loaded.ok() == steps.ok(), "LoadJobSpecFile says ", loaded.status().ToString(), " but the steps say ",
             steps.ToString());
  if (!loaded.ok()) CheckRejection(loaded.status(), "LoadJobSpecFile");
  if (loaded.ok()) FUZZ_CHECK(Same(*loaded, spec), "LoadJobSpecFile and the steps disagree on the spec");
  return 0;
}
