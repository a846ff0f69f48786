#include "engine/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/beneath.h"
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

absl::StatusOr<ManifestEntry> WriteSafetensorsFile(int dir_fd, const std::string& dir, const std::string& name,
                                                   const SafetensorsLayout& layout) {
  DurableFileWriter writer;
  RETURN_IF_ERROR(writer.OpenAt(dir_fd, dir, name));
  RETURN_IF_ERROR(writer.Append(layout.header));
  for (const SafetensorsView* view : layout.data_order) RETURN_IF_ERROR(writer.Append(view->data));
  ASSIGN_OR_RETURN(FileDigest digest, writer.Finish());
  return ManifestEntry{name, digest.size, digest.sha256};
}

// Makes the new directory `tmp` in `dir_fd` and writes every file into it,
// the manifest last, and fsyncs it.
absl::Status WriteFiles(int dir_fd, const std::string& dir, const std::string& tmp, int64_t step,
                        const PreparedCheckpoint& prepared) {
  const std::string tmp_path = dir + "/" + tmp;
  if (::mkdirat(dir_fd, tmp.c_str(), 0755) != 0) return ErrnoError("mkdir", tmp_path, errno);
  ASSIGN_OR_RETURN(UniqueFd tmp_fd, OpenEntry(dir_fd, dir, tmp, O_RDONLY | O_DIRECTORY));
  Manifest manifest;
  manifest.step = step;
  ASSIGN_OR_RETURN(ManifestEntry model, WriteSafetensorsFile(tmp_fd.get(), tmp_path, kModelFileName, prepared.model));
  ASSIGN_OR_RETURN(ManifestEntry optimizer,
                   WriteSafetensorsFile(tmp_fd.get(), tmp_path, kOptimizerFileName, prepared.optimizer));
  ASSIGN_OR_RETURN(FileDigest state, WriteFileDurablyAt(tmp_fd.get(), tmp_path, kStateFileName, prepared.state));
  manifest.files = {model, optimizer, {kStateFileName, state.size, state.sha256}};
  RETURN_IF_ERROR(
      WriteFileDurablyAt(tmp_fd.get(), tmp_path, kManifestFileName, SerializeManifest(manifest)).status());
  return Fsync(tmp_fd.get(), tmp_path);
}

absl::Status RenameAt(int dir_fd, const std::string& dir, const std::string& from, const std::string& to) {
  if (::renameat(dir_fd, from.c_str(), dir_fd, to.c_str()) != 0) {
    return ErrnoError("rename " + dir + "/" + from + " to", dir + "/" + to, errno);
  }
  return absl::OkStatus();
}

// Renames `tmp` to `step_name` in `dir_fd`. An existing checkpoint of the
// same step is first moved aside to a ".tmp-" name (ignored by readers) and
// removed after.
absl::Status Commit(int dir_fd, const std::string& dir, const std::string& tmp, const std::string& step_name) {
  struct stat info;
  const bool replacing = ::fstatat(dir_fd, step_name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0;
  const std::string replaced = std::string(kTemporaryPrefix) + "replaced-" + step_name;
  if (replacing) RETURN_IF_ERROR(RenameAt(dir_fd, dir, step_name, replaced));
  if (absl::Status status = RenameAt(dir_fd, dir, tmp, step_name); !status.ok()) {
    if (replacing) ::renameat(dir_fd, replaced.c_str(), dir_fd, step_name.c_str());  // best effort: put it back
    return status;
  }
  RETURN_IF_ERROR(Fsync(dir_fd, dir));
  if (replacing) {
    // Committed already; a leftover is removed by the next RemoveStaleTemporaries.
    if (absl::Status status = RemoveTreeAt(dir_fd, dir, replaced); !status.ok()) spdlog::warn("{}", status.ToString());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckpointInfo>> ListAt(int dir_fd, const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<DirectoryEntry> entries, ListDirectory(dir_fd, dir));
  std::vector<CheckpointInfo> checkpoints;
  for (const DirectoryEntry& e : entries) {
    int64_t step;
    if (e.is_directory && ParseStepDirectoryName(e.name, &step)) checkpoints.push_back({step, dir + "/" + e.name});
  }
  std::sort(checkpoints.begin(), checkpoints.end(),
            [](const CheckpointInfo& a, const CheckpointInfo& b) { return a.step < b.step; });
  return checkpoints;
}

absl::Status RemoveAt(int dir_fd, const std::string& dir, const std::string& name) {
  const std::string doomed = std::string(kTemporaryPrefix) + "removed-" + name;
  if (::renameat(dir_fd, name.c_str(), dir_fd, doomed.c_str()) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError("rename " + dir + "/" + name + " to", dir + "/" + doomed, errno);
  }
  return RemoveTreeAt(dir_fd, dir, doomed);
}

absl::StatusOr<int> RemoveStaleAt(int dir_fd, const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<DirectoryEntry> entries, ListDirectory(dir_fd, dir));
  int removed = 0;
  for (const DirectoryEntry& e : entries) {
    if (!absl::StartsWith(e.name, kTemporaryPrefix)) continue;
    spdlog::info("removing {}/{}, left by an interrupted checkpoint write", dir, e.name);
    RETURN_IF_ERROR(RemoveTreeAt(dir_fd, dir, e.name));
    ++removed;
  }
  return removed;
}

// Removes checkpoints beyond the newest `keep` by step, never `written`.
void ApplyRetention(int dir_fd, const std::string& dir, int64_t written, int keep) {
  if (keep <= 0) return;
  absl::StatusOr<std::vector<CheckpointInfo>> checkpoints = ListAt(dir_fd, dir);
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
    if (absl::Status status = RemoveAt(dir_fd, dir, StepDirectoryName(it->step)); !status.ok()) {
      spdlog::warn("could not remove old checkpoint: {}", status.ToString());
    }
    removed = true;
  }
  if (removed) {
    if (absl::Status status = Fsync(dir_fd, dir); !status.ok()) spdlog::warn("{}", status.ToString());
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

// The coordinator's record and the manifest name the same files.
absl::Status CheckAgainstRecord(const std::string& path, const Manifest& manifest,
                                const std::vector<ManifestEntry>& recorded) {
  std::map<std::string, const ManifestEntry*> listed;
  for (const ManifestEntry& entry : manifest.files) listed[entry.name] = &entry;
  std::map<std::string, const ManifestEntry*> committed;
  for (const ManifestEntry& entry : recorded) committed[entry.name] = &entry;
  for (const auto& [name, entry] : listed) {
    if (committed.count(name) == 0) {
      return absl::DataLossError(absl::StrFormat(
          "%s/%s: listed by the manifest, but not among the files the coordinator recorded at commit", path, name));
    }
  }
  for (const auto& [name, entry] : committed) {
    if (listed.count(name) == 0) {
      return absl::DataLossError(absl::StrFormat(
          "%s/%s: the coordinator recorded it at commit, but the manifest does not list it", path, name));
    }
  }
  return absl::OkStatus();
}

// Reads the files `manifest` lists from the open checkpoint directory
// `dir_fd` (`path`), checking sizes and checksums against the manifest and,
// when given, against the coordinator's record.
absl::StatusOr<std::map<std::string, std::string>> ReadVerifiedFiles(int dir_fd, const std::string& path,
                                                                     const Manifest& manifest,
                                                                     const std::vector<ManifestEntry>* recorded) {
  std::map<std::string, const ManifestEntry*> record;
  if (recorded != nullptr) {
    RETURN_IF_ERROR(CheckAgainstRecord(path, manifest, *recorded));
    for (const ManifestEntry& entry : *recorded) record[entry.name] = &entry;
  }
  std::map<std::string, std::string> files;
  for (const ManifestEntry& entry : manifest.files) {
    const std::string file = path + "/" + entry.name;
    ASSIGN_OR_RETURN(std::string bytes, ReadFileAt(dir_fd, path, entry.name));
    if (static_cast<int64_t>(bytes.size()) != entry.size) {
      return absl::DataLossError(absl::StrFormat("%s: %d bytes, the manifest says %d", file, bytes.size(), entry.size));
    }
    const std::string sha256 = Sha256Hex(bytes);
    if (sha256 != entry.sha256) {
      return absl::DataLossError(absl::StrFormat("%s: SHA-256 differs from the manifest's", file));
    }
    if (recorded != nullptr) {
      const ManifestEntry& committed = *record.at(entry.name);
      if (static_cast<int64_t>(bytes.size()) != committed.size || sha256 != committed.sha256) {
        return absl::DataLossError(absl::StrFormat(
            "%s: %d bytes with SHA-256 %s, but the coordinator recorded %d bytes with SHA-256 %s at commit (the file "
            "was changed after it was committed)",
            file, bytes.size(), sha256, committed.size, committed.sha256.empty() ? "(none)" : committed.sha256));
      }
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

// The directory `dir` opened beneath `root` ("": `dir` is its own root),
// made first (its parents fsynced) if `create`.
absl::StatusOr<UniqueFd> OpenDirectory(const std::string& dir, const std::string& root, bool create) {
  if (root.empty()) {
    if (create) {
      std::error_code error;
      if (fs::create_directories(dir, error)) {
        // Make the new directory's own entry durable too.
        RETURN_IF_ERROR(FsyncDirectory(fs::absolute(fs::path(dir).lexically_normal()).parent_path().string()));
      }
      if (error) return FilesystemError("create directory", dir, error);
    }
    ASSIGN_OR_RETURN(BeneathRoot opened, BeneathRoot::Open(fs::absolute(dir).string(), Symlinks::kRefuse));
    return opened.Open("", O_RDONLY | O_DIRECTORY);
  }
  ASSIGN_OR_RETURN(std::string relative, RelativeBeneath(dir, root));
  ASSIGN_OR_RETURN(BeneathRoot opened, BeneathRoot::Open(root, Symlinks::kRefuse, create));
  if (create) return opened.MakeDirectories(relative, 0755);
  return opened.Open(relative, O_RDONLY | O_DIRECTORY);
}

// Reads `path`'s manifest and checks its step against the directory's name.
absl::StatusOr<Manifest> ReadManifest(int dir_fd, const std::string& path) {
  const std::string manifest_path = path + "/" + kManifestFileName;
  ASSIGN_OR_RETURN(std::string manifest_text, ReadFileAt(dir_fd, path, kManifestFileName));
  ASSIGN_OR_RETURN(Manifest manifest, ParseManifest(manifest_text, manifest_path));
  int64_t named_step;
  if (ParseStepDirectoryName(fs::path(path).filename().string(), &named_step) && named_step != manifest.step) {
    return absl::DataLossError(
        absl::StrFormat("%s: step %d does not match the directory's name", manifest_path, manifest.step));
  }
  return manifest;
}

}  // namespace

absl::StatusOr<std::string> CheckpointRootFor(const std::string& path, const std::vector<std::string>& roots) {
  if (roots.empty()) return std::string();
  std::optional<std::string> root = RootOf(path, roots);
  if (!root.has_value()) {
    return absl::PermissionDeniedError(
        absl::StrFormat("%s is not beneath a checkpoint root (%s)", path, absl::StrJoin(roots, ", ")));
  }
  return *root;
}

absl::StatusOr<std::vector<CheckpointInfo>> ListCheckpoints(const std::string& dir, const std::string& root) {
  absl::StatusOr<UniqueFd> dir_fd = OpenDirectory(dir, root, /*create=*/false);
  if (dir_fd.status().code() == absl::StatusCode::kNotFound) return std::vector<CheckpointInfo>();
  if (!dir_fd.ok()) return dir_fd.status();
  return ListAt(dir_fd->get(), dir);
}

absl::Status RemoveCheckpoint(const std::string& path, const std::string& root) {
  const fs::path p(path);
  absl::StatusOr<UniqueFd> parent = OpenDirectory(p.parent_path().string(), root, /*create=*/false);
  if (parent.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  if (!parent.ok()) return parent.status();
  return RemoveAt(parent->get(), p.parent_path().string(), p.filename().string());
}

absl::Status RemoveEmptyDirectory(const std::string& path, const std::string& root) {
  const fs::path p(path);
  absl::StatusOr<UniqueFd> parent = OpenDirectory(p.parent_path().string(), root, /*create=*/false);
  if (parent.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  if (!parent.ok()) return parent.status();
  // unlinkat(AT_REMOVEDIR) removes only an empty directory; a link is not
  // one (ENOTDIR) and is left alone.
  if (::unlinkat(parent->get(), p.filename().c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT ||
      errno == ENOTEMPTY || errno == EEXIST || errno == ENOTDIR) {
    return absl::OkStatus();
  }
  return ErrnoError("remove", path, errno);
}

absl::StatusOr<int> RemoveStaleTemporaries(const std::string& dir, const std::string& root) {
  absl::StatusOr<UniqueFd> dir_fd = OpenDirectory(dir, root, /*create=*/false);
  if (dir_fd.status().code() == absl::StatusCode::kNotFound) return 0;
  if (!dir_fd.ok()) return dir_fd.status();
  return RemoveStaleAt(dir_fd->get(), dir);
}

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int64_t step, const CheckpointContents& contents,
                                            int keep, const std::string& root) {
  if (step < 0) return absl::InvalidArgumentError(absl::StrFormat("checkpoint step %d is negative", step));
  PreparedCheckpoint prepared;
  RETURN_IF_ERROR(Prepare(contents, &prepared));
  ASSIGN_OR_RETURN(UniqueFd dir_fd, OpenDirectory(dir, root, /*create=*/true));
  RETURN_IF_ERROR(RemoveStaleAt(dir_fd.get(), dir).status());

  const std::string step_name = StepDirectoryName(step);
  const std::string tmp = kTemporaryPrefix + step_name;
  absl::Status status = WriteFiles(dir_fd.get(), dir, tmp, step, prepared);
  if (status.ok()) status = Commit(dir_fd.get(), dir, tmp, step_name);
  if (!status.ok()) {
    if (absl::Status cleanup = RemoveTreeAt(dir_fd.get(), dir, tmp); !cleanup.ok()) {
      spdlog::warn("{}", cleanup.ToString());
    }
    return status;
  }
  ApplyRetention(dir_fd.get(), dir, step, keep);
  return dir + "/" + step_name;
}

absl::StatusOr<Manifest> VerifyCheckpoint(const std::string& path, const std::string& root) {
  ASSIGN_OR_RETURN(UniqueFd dir_fd, OpenDirectory(path, root, /*create=*/false));
  ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(dir_fd.get(), path));
  RETURN_IF_ERROR(ReadVerifiedFiles(dir_fd.get(), path, manifest, nullptr).status());
  return manifest;
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& path, const std::string& root,
                                                const std::vector<ManifestEntry>* recorded) {
  LoadedCheckpoint loaded;
  loaded.path = path;
  ASSIGN_OR_RETURN(UniqueFd dir_fd, OpenDirectory(path, root, /*create=*/false));
  ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(dir_fd.get(), path));
  loaded.step = manifest.step;
  ASSIGN_OR_RETURN(auto files, ReadVerifiedFiles(dir_fd.get(), path, manifest, recorded));
  ASSIGN_OR_RETURN(loaded.contents.model, ParseTensors(files[kModelFileName], path + "/" + kModelFileName));
  ASSIGN_OR_RETURN(loaded.contents.optimizer, ParseTensors(files[kOptimizerFileName], path + "/" + kOptimizerFileName));
  ASSIGN_OR_RETURN(loaded.contents.state, ParseState(files[kStateFileName], path + "/" + kStateFileName));
  return loaded;
}

absl::StatusOr<LoadedCheckpoint> LoadNewestCheckpoint(const std::string& dir, const std::string& root) {
  ASSIGN_OR_RETURN(std::vector<CheckpointInfo> checkpoints, ListCheckpoints(dir, root));
  std::vector<std::string> skipped;
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(it->path, root.empty() ? dir : root);
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
