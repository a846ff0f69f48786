#include "coordinator/core/job_admission.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env_policy.h"
#include "common/path_within.h"
#include "common/spec.h"
#include "common/status_macros.h"

namespace ringmaster::coordinator {
namespace {

constexpr size_t kMaxRequestIdLength = 128;
// SubmitJobRequest.overrides: how many, and how long each.
constexpr size_t kMaxOverrides = 256;
constexpr size_t kMaxOverrideLength = 4096;

}  // namespace

absl::Status CheckSubmitOptions(const SubmitOptions& options) {
  if (options.request_id.size() > kMaxRequestIdLength) {
    return absl::InvalidArgumentError(absl::StrCat("request_id: must be at most ", kMaxRequestIdLength,
                                                   " characters, got ", options.request_id.size()));
  }
  const std::vector<std::string>& overrides = options.overrides;
  if (overrides.size() > kMaxOverrides) {
    return absl::InvalidArgumentError(
        absl::StrCat("overrides: at most ", kMaxOverrides, " --set assignments, got ", overrides.size()));
  }
  for (size_t i = 0; i < overrides.size(); ++i) {
    if (overrides[i].size() > kMaxOverrideLength) {
      return absl::InvalidArgumentError(absl::StrCat("overrides[", i, "]: must be at most ", kMaxOverrideLength,
                                                     " bytes, got ", overrides[i].size()));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> CheckpointRoots(const JobControllerOptions& options) {
  std::vector<std::string> roots = options.allowed_checkpoint_roots;
  roots.push_back(options.checkpoint_root);
  return roots;
}

absl::Status CheckCheckpointRoot(const std::string& directory, const std::vector<std::string>& roots) {
  if (directory.empty()) return absl::OkStatus();
  if (PathWithinAny(directory, roots)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint.directory: ", directory, " is not within a checkpoint root this coordinator allows (",
      absl::StrJoin(roots, ", "),
      "); leave it out to use the coordinator's own, or ask the operator to allow it "
      "(ringmaster-coordinator --checkpoint-allowed-roots)"));
}

absl::Status CheckEnvAllowed(const v1::JobSpec& spec, const std::vector<std::string>& allowed_env) {
  ASSIGN_OR_RETURN(EnvPolicy policy, EnvPolicy::Create(allowed_env));
  for (const bool program : {false, true}) {  // the spec's env, then the program's, under the same rules
    std::vector<std::string> names;
    for (const auto& [name, value] : program ? spec.program().env() : spec.env()) names.push_back(name);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      if (absl::Status s = policy.Check(name); !s.ok()) {
        return program ? absl::InvalidArgumentError(absl::StrCat("program.", s.message())) : s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AdmitJobSpec(v1::JobSpec* spec, const JobControllerOptions& options) {
  ApplyDefaults(spec);
  RETURN_IF_ERROR(ValidateJobSpec(*spec));
  RETURN_IF_ERROR(CheckCheckpointRoot(spec->checkpoint().directory(), CheckpointRoots(options)));
  return CheckEnvAllowed(*spec, options.allowed_env);
}

}  // namespace ringmaster::coordinator
