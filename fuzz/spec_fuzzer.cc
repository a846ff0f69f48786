// libFuzzer target: job spec loading (common/spec.h), the path a spec file
// and the CLI's --set take: ParseJobSpec (YAML or JSON) -> ApplyOverride ->
// ApplyDefaults -> ValidateJobSpec, and LoadJobSpecFile on the same bytes.
//
// Input: [format: 1 byte][inflation: 4 bytes, if format bit 1][document]
// [\0 override]... Format bit 0: JSON (else YAML); bit 1: inflate. An
// inflation is [target: 1 byte][amount: 3 bytes LE] (fuzz_input.h); the
// spec parsed, overridden and defaulted is then grown in code and validated
// again (CheckInflated): target % 256 < kSpecTargets grows a bounded part
// of the spec (labels, node_selector, the two paths, env, a label's or a
// variable's value, the whole spec past 256 KiB); any other target grows
// any field, by reflection (fuzz/inflate.h), by `amount` entries or to
// `amount` bytes (at most 70,000 entries, 8 MiB, 16 MiB in all).
// Properties: no crash or sanitizer report; every rejection is
// INVALID_ARGUMENT; a failed ApplyOverride leaves the spec unchanged;
// ApplyDefaults is idempotent; LoadJobSpecFile agrees with the steps done
// one by one; a spec past any limit of common/spec_limits.h is refused;
// a valid spec grown past a limit is refused with the error that names that
// field ("labels: at most 64 labels, got 70064"), and grown within the
// limits it still validates.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "common/spec_limits.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/inflate.h"
#include "fuzz/spec_bounds.h"
#include "google/protobuf/util/message_differencer.h"

namespace {

using ringmaster::SpecFormat;
using ringmaster::fuzz::Inflation;
using ringmaster::v1::JobSpec;

constexpr uint8_t kJson = 1 << 0;
constexpr uint8_t kInflate = 1 << 1;

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

// No spec past a limit validates.
void CheckLimits(const JobSpec& spec, const absl::Status& validated) {
  const std::string broken = ringmaster::fuzz::BrokenLimit(spec);
  FUZZ_CHECK(broken.empty() || !validated.ok(), "a spec past the limit on ", broken, " validated");
}

// The spec grown by an inflation's named targets (0..kSpecTargets-1).
constexpr int kSpecTargets = 8;

void AddEntries(google::protobuf::Map<std::string, std::string>* map, const char* prefix, size_t n,
                const std::string& value) {
  for (size_t i = 0; i < n; ++i) (*map)[absl::StrCat(prefix, i)] = value;
}

// `base` (parsed, overridden, defaulted; ValidateJobSpec said `base_status`)
// grown as `inflation` says, then validated: see the file comment.
void CheckInflated(const JobSpec& base, const absl::Status& base_status, const Inflation& inflation) {
  using namespace ringmaster;  // the limits
  JobSpec big = base;
  const size_t entries = std::min<size_t>(inflation.amount, fuzz::kMaxInflatedEntries);
  const size_t bytes = std::min<size_t>(inflation.amount, fuzz::kMaxInflatedStringBytes);
  // When `base` is valid: the error's beginning, "" for "validates" (or,
  // with `within`, an error that begins so).
  std::string expected;
  std::string within;
  auto too_many = [&](const char* field, int count, int max, const char* what) {
    if (count > max) expected = absl::StrCat(field, ": at most ", max, " ", what, ", got ", count);
  };
  switch (inflation.target) {
    case 0:
      AddEntries(big.mutable_labels(), "fuzz-label-", entries, "v");
      too_many("labels", big.labels_size(), kMaxLabels, "labels");
      break;
    case 1:
      AddEntries(big.mutable_resources()->mutable_node_selector(), "fuzz-selector-", entries, "v");
      too_many("resources.node_selector", big.resources().node_selector_size(), kMaxNodeSelectorEntries, "entries");
      break;
    case 2:
    case 3: {
      const bool data = inflation.target == 2;
      std::string path = "/" + std::string(bytes == 0 ? 0 : bytes - 1, 'p');
      if (data) {
        big.mutable_data()->set_path(std::move(path));
      } else {
        big.mutable_checkpoint()->set_directory(std::move(path));
      }
      const char* field = data ? "data.path" : "checkpoint.directory";
      if (std::max<size_t>(bytes, 1) > kMaxPathBytes) {
        expected = absl::StrCat(field, ": at most ", kMaxPathBytes, " bytes, got ", bytes);
      } else {
        within = data ? "data." : "checkpoint.";  // e.g. a path the dataset does not take
      }
      break;
    }
    case 4:
      AddEntries(big.mutable_env(), "FUZZ_", entries, "1");
      too_many("env", big.env_size(), kMaxEnvVariables, "variables");
      break;
    case 5:
      (*big.mutable_env())["FUZZ_BIG"] = std::string(bytes, 'v');
      too_many("env", big.env_size(), kMaxEnvVariables, "variables");
      if (expected.empty() && bytes > kMaxEnvValueBytes) {
        expected = absl::StrCat("env.FUZZ_BIG: value longer than ", kMaxEnvValueBytes, " bytes");
      }
      break;
    case 6:
      (*big.mutable_labels())["fuzz-big"] = std::string(bytes, 'v');
      too_many("labels", big.labels_size(), kMaxLabels, "labels");
      if (expected.empty() && bytes > kMaxLabelValueBytes) {
        expected = absl::StrCat("labels.fuzz-big: value longer than ", kMaxLabelValueBytes, " characters");
      }
      break;
    case 7:
      // The whole spec: variables of the longest value, up to the most a
      // spec may have (64 of them do not fit in 256 KiB).
      for (size_t i = 0; i < entries && big.env_size() < kMaxEnvVariables; ++i) {
        (*big.mutable_env())[absl::StrCat("FUZZ_S", i)] = std::string(kMaxEnvValueBytes, 's');
      }
      break;
    default: {
      size_t budget = fuzz::kMaxInflatedBytesPerInput;
      Inflation any = inflation;
      any.target = static_cast<uint8_t>(inflation.target - kSpecTargets);
      (void)fuzz::Inflate(&big, any, &budget);
      break;
    }
  }
  ApplyDefaults(&big);  // parts an inflation created get theirs
  if (expected.empty() && big.ByteSizeLong() > kMaxSpecBytes) {
    expected = absl::StrCat("spec: ", big.ByteSizeLong(), " bytes serialized, more than the ", kMaxSpecBytes);
    if (inflation.target == 7) absl::StrAppend(&expected, " (256 KiB) a job spec may hold; its largest part is env (");
  }
  const absl::Status status = ValidateJobSpec(big);
  if (!status.ok()) CheckRejection(status, "ValidateJobSpec of the inflated spec");
  CheckLimits(big, status);
  if (!base_status.ok() || inflation.target >= kSpecTargets) return;
  if (!expected.empty()) {
    FUZZ_CHECK(absl::StartsWith(status.message(), expected), "inflated (target ", int{inflation.target}, ", amount ",
               inflation.amount, "): expected an error beginning \"", expected, "\", got ", status.ToString());
  } else {
    FUZZ_CHECK(status.ok() || (!within.empty() && absl::StartsWith(status.message(), within)), "inflated (target ",
               int{inflation.target}, ", amount ", inflation.amount, ") within the limits: ", status.ToString());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ringmaster::fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.Byte();
  const SpecFormat format = (flags & kJson) != 0 ? SpecFormat::kJson : SpecFormat::kYaml;
  Inflation inflation;
  if ((flags & kInflate) != 0) inflation = ringmaster::fuzz::NextInflation(in);
  const std::string_view rest(reinterpret_cast<const char*>(data + (size - in.remaining())), in.remaining());
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
    spec = *parsed;  // a copy: ApplyOverrides below starts again from it
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
      // ApplyOverrides: the same assignments, then its warm-up rule.
      JobSpec whole = *parsed;
      FUZZ_CHECK(ringmaster::ApplyOverrides(&whole, overrides).ok(), "ApplyOverrides refused what ApplyOverride took");
      spec = std::move(whole);
      if (spec.name().empty()) spec.set_name("job");  // as LoadJobSpecFile names it
      ringmaster::ApplyDefaults(&spec);
      JobSpec again = spec;
      ringmaster::ApplyDefaults(&again);
      FUZZ_CHECK(Same(spec, again), "ApplyDefaults is not idempotent");
      steps = ringmaster::ValidateJobSpec(spec);
      if (!steps.ok()) CheckRejection(steps, "ValidateJobSpec");
      CheckLimits(spec, steps);
      (void)ringmaster::ModelBlockCount(spec.model());
      if (inflation.enabled) CheckInflated(spec, steps, inflation);
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
