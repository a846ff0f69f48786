#include "engine/checkpoint/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/checkpoint/file_io.h"
#include "engine/checkpoint/safetensors.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

namespace fs = std::filesystem;

constexpr char kStepPrefix[] = "step-";
constexpr char kTemporaryPrefix[] = ".tmp-";
// What PyTorch users' tools expect in a state_dict file's metadata.
const SafetensorsMetadata kTorchMetadata = {{"format", "pt"}};

absl::Status FilesystemError(absl::string_view operation, const std::string& path, const std::error_code& error) {
  return ErrnoError(operation, path, error.value());
}

bool ParseStepDirectoryName(absl::string_view name, int64_t* step) {
  if (!absl::StartsWith(name, kStepPrefix)) return false;
  name.remove_prefix(sizeof(kStepPrefix) - 1);
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         absl::SimpleAtoi(name, step);
}

absl::StatusOr<std::vector<SafetensorsView>> Views(const NamedTensors& tensors) {
  std::vector<SafetensorsView> views;
  for (const auto& [name, tensor] : tensors) {
    ASSIGN_OR_RETURN(SafetensorsView view, ViewOf(name, tensor));
    views.push_back(std::move(view));
  }
  return views;
}

// Everything a checkpoint directory holds, validated and serialised before the
// first byte is written. `model` and `optimizer` point into the views.
struct PreparedCheckpoint {
  std::vector<SafetensorsView> model_views;
  std::vector<SafetensorsView> optimizer_views;
  SafetensorsLayout model;
  SafetensorsLayout optimizer;
  std::string state;
};

absl::Status Prepare(const CheckpointContents& contents, PreparedCheckpoint* prepared) {
  ASSIGN_OR_RETURN(prepared->model_views, Views(contents.model));
  ASSIGN_OR_RETURN(prepared->optimizer_views, Views(contents.optimizer));
  ASSIGN_OR_RETURN(prepared->model, LayOutSafetensors(prepared->model_views, kTorchMetadata));
  ASSIGN_OR_RETURN(prepared->optimizer, LayOutSafetensors(prepared->optimizer_views, kTorchMetadata));
  ASSIGN_OR_RETURN(prepared->state, SerializeState(contents.state));
  return absl::OkStatus();
}

absl::StatusOr<ManifestEntry> WriteSafetensorsFile(const std::string& dir, const std::string& name,
                                                   const SafetensorsLayout& layout) {
  DurableFileWriter writer;
  RETURN_IF_ERROR(writer.Open(dir + "/" + name));
  RETURN_IF_ERROR(writer.Append(layout.header));
  for (const SafetensorsView* view : layout.data_order) RETURN_IF_ERROR(writer.Append(view->data));
  ASSIGN_OR_RETURN(FileDigest digest, writer.Finish());
  return ManifestEntry{name, digest.size, digest.sha256};
}

// Writes every file into the new directory `tmp`, the manifest last, and fsyncs it.
absl::Status WriteFiles(const std::string& tmp, int64_t step, const PreparedCheckpoint& prepared) {
  if (::mkdir(tmp.c_str(), 0755) != 0) return ErrnoError("mkdir", tmp, errno);
  Manifest manifest;
  manifest.step = step;
  ASSIGN_OR_RETURN(ManifestEntry model, WriteSafetensorsFile(tmp, kModelFileName, prepared.model));
  ASSIGN_OR_RETURN(ManifestEntry optimizer, WriteSafetensorsFile(tmp, kOptimizerFileName, prepared.optimizer));
  ASSIGN_OR_RETURN(FileDigest state, WriteFileDurably(tmp + "/" + kStateFileName, prepared.state));
  manifest.files = {model, optimizer, {kStateFileName, state.size, state.sha256}};
  RETURN_IF_ERROR(WriteFileDurably(tmp + "/" + kManifestFileName, SerializeManifest(manifest)).status());
  return FsyncDirectory(tmp);
}

absl::Status Rename(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) return ErrnoError("rename " + from + " to", to, errno);
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) return FilesystemError("remove", path, error);
  return absl::OkStatus();
}

// Renames `tmp` to `final_path`. An existing checkpoint of the same step is
// first moved aside to a ".tmp-" name (ignored by readers) and removed after.
absl::Status Commit(const std::string& dir, const std::string& tmp, const std::string& final_path,
                    const std::string& step_name) {
  struct stat info;
  const bool replacing = ::lstat(final_path.c_str(), &info) == 0;
  const std::string replaced = dir + "/" + kTemporaryPrefix + "replaced-" + step_name;
  if (replacing) RETURN_IF_ERROR(Rename(final_path, replaced));
  if (absl::Status status = Rename(tmp, final_path); !status.ok()) {
    if (replacing) std::rename(replaced.c_str(), final_path.c_str());  // best effort: put the old one back
    return status;
  }
  RETURN_IF_ERROR(FsyncDirectory(dir));
  if (replacing) {
    // Committed already; a leftover is removed by the next RemoveStaleTemporaries.
    if (absl::Status status = RemoveTree(replaced); !status.ok()) spdlog::warn("{}", status.ToString());
  }
  return absl::OkStatus();
}

// Removes checkpoints beyond the newest `keep` by step, never `written`.
void ApplyRetention(const std::string& dir, int64_t written, int keep) {
  if (keep <= 0) return;
  absl::StatusOr<std::vector<CheckpointInfo>> checkpoints = ListCheckpoints(dir);
  if (!checkpoints.ok()) {
    spdlog::warn("checkpoint retention in {} skipped: {}", dir, checkpoints.status().ToString());
    return;
  }
  int kept = 0;
  bool removed = false;
  for (auto it = checkpoints->rbegin(); it != checkpoints->rend(); ++it) {
    if (it->step == written || kept < keep) {
      ++kept;
      continue;
    }
    if (absl::Status status = RemoveCheckpoint(it->path); !status.ok()) {
      spdlog::warn("could not remove old checkpoint: {}", status.ToString());
    }
    removed = true;
  }
  if (removed) {
    if (absl::Status status = FsyncDirectory(dir); !status.ok()) spdlog::warn("{}", status.ToString());
  }
}

absl::StatusOr<NamedTensors> ParseTensors(absl::string_view bytes, const std::string& path) {
  ASSIGN_OR_RETURN(ParsedSafetensors parsed, ParseSafetensors(bytes, path));
  NamedTensors tensors;
  for (const SafetensorsView& view : parsed.tensors) {
    absl::StatusOr<Tensor> tensor = ToTensor(view);
    if (!tensor.ok()) return absl::DataLossError(absl::StrCat(path, ": ", tensor.status().message()));
    tensors.emplace_back(view.name, *std::move(tensor));
  }
  return tensors;
}

// Reads the files `manifest` lists from `path`, checking sizes and checksums.
absl::StatusOr<std::map<std::string, std::string>> ReadVerifiedFiles(const std::string& path,
                                                                     const Manifest& manifest) {
  std::map<std::string, std::string> files;
  for (const ManifestEntry& entry : manifest.files) {
    const std::string file = path + "/" + entry.name;
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(file));
    if (static_cast<int64_t>(bytes.size()) != entry.size) {
      return absl::DataLossError(absl::StrFormat("%s: %d bytes, the manifest says %d", file, bytes.size(), entry.size));
    }
    if (Sha256Hex(bytes) != entry.sha256) {
      return absl::DataLossError(absl::StrFormat("%s: SHA-256 differs from the manifest's", file));
    }
    files[entry.name] = std::move(bytes);
  }
  for (const char* required : {kModelFileName, kOptimizerFileName, kStateFileName}) {
    if (files.count(required) == 0) {
      return absl::DataLossError(absl::StrFormat("%s/%s does not list %s", path, kManifestFileName, required));
    }
  }
  return files;
}

}  // namespace

std::string StepDirectoryName(int64_t step) { return absl::StrFormat("%s%09d", kStepPrefix, step); }

absl::StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& dir) {
  std::vector<CheckpointInfo> checkpoints;
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error == std::errc::no_such_file_or_directory) return checkpoints;
  if (error) return FilesystemError("list", dir, error);
  for (; it != fs::directory_iterator(); it.increment(error)) {
    int64_t step;
    std::error_code type_error;
    if (ParseStepDirectoryName(it->path().filename().string(), &step) && it->is_directory(type_error)) {
      checkpoints.push_back({step, it->path().string()});
    }
  }
  if (error) return FilesystemError("list", dir, error);
  std::sort(checkpoints.begin(), checkpoints.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return checkpoints;
}

absl::Status RemoveCheckpoint(const std::string& path) {
  const fs::path p(path);
  const std::string doomed =
      (p.parent_path() / (std::string(kTemporaryPrefix) + "removed-" + p.filename().string())).string();
  if (std::rename(path.c_str(), doomed.c_str()) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError("rename " + path + " to", doomed, errno);
  }
  return RemoveTree(doomed);
}

absl::StatusOr<int> RemoveStaleTemporaries(const std::string& dir) {
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error == std::errc::no_such_file_or_directory) return 0;
  if (error) return FilesystemError("list", dir, error);
  std::vector<std::string> stale;
  for (; it != fs::directory_iterator(); it.increment(error)) {
    if (absl::StartsWith(it->path().filename().string(), kTemporaryPrefix)) stale.push_back(it->path().string());
  }
  if (error) return FilesystemError("list", dir, error);
  for (const std::string& path : stale) {
    spdlog::info("removing {}, left by an interrupted checkpoint write", path);
    RETURN_IF_ERROR(RemoveTree(path));
  }
  return static_cast<int>(stale.size());
}

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int64_t step, const CheckpointContents& contents,
                                            int keep) {
  if (step < 0) return absl::InvalidArgumentError(absl::StrFormat("checkpoint step %d is negative", step));
  PreparedCheckpoint prepared;
  RETURN_IF_ERROR(Prepare(contents, &prepared));
  std::error_code error;
  if (fs::create_directories(dir, error)) {
    // Make the new directory's own entry durable too.
    const fs::path parent = fs::absolute(dir).parent_path();
    RETURN_IF_ERROR(FsyncDirectory(parent.string()));
  }
  if (error) return FilesystemError("create directory", dir, error);
  RETURN_IF_ERROR(RemoveStaleTemporaries(dir).status());

  const std::string step_name = StepDirectoryName(step);
  const std::string tmp = dir + "/" + kTemporaryPrefix + step_name;
  const std::string final_path = dir + "/" + step_name;
  absl::Status status = WriteFiles(tmp, step, prepared);
  if (status.ok()) status = Commit(dir, tmp, final_path, step_name);
  if (!status.ok()) {
    if (absl::Status cleanup = RemoveTree(tmp); !cleanup.ok()) spdlog::warn("{}", cleanup.ToString());
    return status;
  }
  ApplyRetention(dir, step, keep);
  return final_path;
}

// Reads `path`'s manifest and checks its step against the directory's name.
absl::StatusOr<Manifest> ReadManifest(const std::string& path) {
  const std::string manifest_path = path + "/" + kManifestFileName;
  ASSIGN_OR_RETURN(std::string manifest_text, ReadFile(manifest_path));
  ASSIGN_OR_RETURN(Manifest manifest, ParseManifest(manifest_text, manifest_path));
  int64_t named_step;
  if (ParseStepDirectoryName(fs::path(path).filename().string(), &named_step) && named_step != manifest.step) {
    return absl::DataLossError(
        absl::StrFormat("%s: step %d does not match the directory's name", manifest_path, manifest.step));
  }
  return manifest;
}

absl::StatusOr<Manifest> VerifyCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(path));
  RETURN_IF_ERROR(ReadVerifiedFiles(path, manifest).status());
  return manifest;
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& path) {
  LoadedCheckpoint loaded;
  loaded.path = path;
  ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(path));
  loaded.step = manifest.step;
  ASSIGN_OR_RETURN(auto files, ReadVerifiedFiles(path, manifest));
  ASSIGN_OR_RETURN(loaded.contents.model, ParseTensors(files[kModelFileName], path + "/" + kModelFileName));
  ASSIGN_OR_RETURN(loaded.contents.optimizer, ParseTensors(files[kOptimizerFileName], path + "/" + kOptimizerFileName));
  ASSIGN_OR_RETURN(loaded.contents.state, ParseState(files[kStateFileName], path + "/" + kStateFileName));
  return loaded;
}

absl::StatusOr<LoadedCheckpoint> LoadNewestCheckpoint(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<CheckpointInfo> checkpoints, ListCheckpoints(dir));
  std::vector<std::string> skipped;
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(it->path);
    if (loaded.ok()) {
      loaded->skipped = std::move(skipped);
      return loaded;
    }
    spdlog::warn("checkpoint {} is damaged, trying the previous one: {}", it->path,
                 std::string(loaded.status().message()));
    skipped.push_back(absl::StrCat(it->path, ": ", loaded.status().message()));
  }
  return absl::NotFoundError(absl::StrFormat(
      "no valid checkpoint in %s%s", dir, skipped.empty() ? "" : " (damaged: " + absl::StrJoin(skipped, "; ") + ")"));
}

}  // namespace ringmaster::engine
