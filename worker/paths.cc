#include "worker/paths.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster::worker {
namespace {

bool IsExecutableFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

absl::Status ValidateJobId(absl::string_view job_id) {
  if (job_id.empty() || job_id.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat("job_id: must be 1 to 128 characters, got ", job_id.size()));
  }
  if (job_id == "." || job_id == "..") {
    return absl::InvalidArgumentError(absl::StrCat("job_id: \"", job_id, "\" cannot name a directory"));
  }
  for (char c : job_id) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("job_id: \"", job_id, "\" has a character outside [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

std::string AgentSocketPath(const std::string& state_dir) { return state_dir + "/agent.sock"; }

std::string NodeIdPath(const std::string& state_dir) { return state_dir + "/node-id"; }
std::string NodeCredentialPath(const std::string& state_dir) { return state_dir + "/node-credential"; }

std::string JobsDir(const std::string& state_dir) { return absl::StrCat(state_dir, "/jobs"); }

std::string GenerationDir(const std::string& state_dir, const std::string& job_id, int64_t generation) {
  return absl::StrCat(JobsDir(state_dir), "/", job_id, "/gen-", generation);
}

std::string RankLogPath(const std::string& state_dir, const std::string& job_id, int64_t generation, int32_t rank) {
  return absl::StrCat(GenerationDir(state_dir, job_id, generation), "/rank-", rank, ".log");
}

std::string RanksDir(const std::string& state_dir) { return absl::StrCat(state_dir, "/ranks"); }

std::string JobPrivateDir(const std::string& state_dir, const std::string& job_id) {
  return absl::StrCat(RanksDir(state_dir), "/", job_id);
}

std::string JobTmpDir(const std::string& state_dir, const std::string& job_id) {
  return absl::StrCat(JobPrivateDir(state_dir, job_id), "/tmp");
}

std::string RankWorkDir(const std::string& state_dir, const std::string& job_id, int64_t generation, int32_t rank) {
  return absl::StrCat(JobPrivateDir(state_dir, job_id), "/gen-", generation, "/rank-", rank);
}

absl::StatusOr<std::string> FindTrainer(const std::string& flag_value, const std::string& self_exe,
                                        const std::string& path_env) {
  if (!flag_value.empty()) {
    if (IsExecutableFile(flag_value)) return std::filesystem::absolute(flag_value).string();
    return absl::NotFoundError(absl::StrCat("--trainer ", flag_value, ": not an executable file"));
  }
  constexpr char kName[] = "ringmaster-trainer";
  std::vector<std::string> tried;
  if (!self_exe.empty()) {
    std::filesystem::path dir = std::filesystem::path(self_exe).parent_path();
    for (const std::filesystem::path& candidate : {dir / kName, dir.parent_path() / "engine" / kName}) {
      tried.push_back(candidate.string());
      if (IsExecutableFile(candidate.string())) return candidate.lexically_normal().string();
    }
  }
  for (absl::string_view dir : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", kName);
    if (IsExecutableFile(candidate)) return candidate;
  }
  tried.push_back("$PATH");
  return absl::NotFoundError(
      absl::StrCat("cannot find ", kName, " (looked in ", absl::StrJoin(tried, ", "), "); pass --trainer PATH"));
}

absl::StatusOr<std::string> FindPythonSdk(const std::string& flag_value, const std::string& self_exe) {
  auto holds_sdk = [](const std::filesystem::path& dir) {
    std::error_code ec;
    return std::filesystem::is_regular_file(dir / "ringmaster" / "__init__.py", ec);
  };
  if (!flag_value.empty()) {
    if (holds_sdk(flag_value)) return std::filesystem::absolute(flag_value).lexically_normal().string();
    return absl::NotFoundError(absl::StrCat("--python-sdk ", flag_value, ": holds no ringmaster/__init__.py"));
  }
  if (self_exe.empty()) return std::string();
  const std::filesystem::path dir = std::filesystem::path(self_exe).parent_path();
  for (const std::filesystem::path& candidate : {dir / "python", dir.parent_path() / "python" / "sdk"}) {
    if (holds_sdk(candidate)) return candidate.lexically_normal().string();
  }
  return std::string();
}

}  // namespace ringmaster::worker
