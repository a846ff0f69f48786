#include "worker/job_roots.h"

#include <fcntl.h>

#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::worker {
namespace {

absl::Status OutsideDataRoots(const std::string& path, const std::vector<std::string>& roots) {
  return absl::PermissionDeniedError(
      absl::StrCat("data.path: ", path, " is outside this node's data roots (",
                   roots.empty() ? "none configured" : absl::StrJoin(roots, ", "),
                   "); put the dataset under one of them, or ask the operator to add a root "
                   "(ringmaster-worker --data-roots)"));
}

absl::StatusOr<std::string> CheckpointRoot(const std::string& dir, const std::vector<std::string>& roots) {
  std::optional<std::string> root = RootOf(dir, roots);
  if (!root.has_value()) {
    return absl::PermissionDeniedError(absl::StrCat("checkpoint_dir: ", dir,
                                                    " is not beneath a checkpoint root the coordinator named (",
                                                    roots.empty() ? "none" : absl::StrJoin(roots, ", "), ")"));
  }
  return *root;
}

}  // namespace

absl::StatusOr<std::string> DataRootFor(const std::string& path, const std::vector<std::string>& roots) {
  if (path.empty()) return std::string();  // synthetic data
  std::optional<std::string> root = RootOf(path, roots);
  if (!root.has_value()) {
    // A root that is a link (/data -> /mnt/data) holds what lies beneath its
    // target, named that way.
    std::vector<std::string> resolved;
    for (const std::string& r : roots) {
      std::error_code ec;
      const std::filesystem::path canonical = std::filesystem::canonical(r, ec);
      if (!ec) resolved.push_back(canonical.string());
    }
    root = RootOf(path, resolved);
  }
  if (!root.has_value()) return OutsideDataRoots(path, roots);
  absl::StatusOr<std::string> relative = RelativeBeneath(path, *root);
  if (!relative.ok()) return OutsideDataRoots(path, roots);
  absl::StatusOr<BeneathRoot> opened = BeneathRoot::Open(*root, Symlinks::kWithinRoot);
  if (!opened.ok()) return *root;  // the trainer reports a missing root
  // Non-blocking: a FIFO there must not hold up the worker.
  absl::StatusOr<UniqueFd> fd = opened->Open(*relative, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd.status().code() == absl::StatusCode::kPermissionDenied) {
    return absl::PermissionDeniedError(absl::StrCat("data.path: ", fd.status().message()));
  }
  return *root;  // open, or missing (the trainer says so, naming the file)
}

absl::Status CheckCheckpointDir(const std::string& dir, const std::vector<std::string>& roots) {
  if (dir.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> root = CheckpointRoot(dir, roots);
  if (!root.ok()) return root.status();
  absl::StatusOr<std::string> relative = RelativeBeneath(dir, *root);
  if (!relative.ok()) return relative.status();
  absl::StatusOr<BeneathRoot> opened = BeneathRoot::Open(*root, Symlinks::kRefuse);
  if (opened.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();  // nothing beneath it yet
  if (!opened.ok()) return opened.status();
  // Resolution goes left to right: NOT_FOUND means every directory before
  // the first missing one was opened, none through a link.
  absl::StatusOr<UniqueFd> fd = opened->Open(*relative, O_RDONLY | O_DIRECTORY);
  if (fd.ok() || fd.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  if (fd.status().code() == absl::StatusCode::kPermissionDenied) {
    return absl::PermissionDeniedError(absl::StrCat("checkpoint_dir: ", fd.status().message()));
  }
  return fd.status();
}

absl::StatusOr<UniqueFd> OpenCheckpointDirectory(const std::string& dir, const std::vector<std::string>& roots) {
  absl::StatusOr<std::string> root = CheckpointRoot(dir, roots);
  if (!root.ok()) return root.status();
  absl::StatusOr<std::string> relative = RelativeBeneath(dir, *root);
  if (!relative.ok()) return relative.status();
  absl::StatusOr<BeneathRoot> opened = BeneathRoot::Open(*root, Symlinks::kRefuse);
  if (!opened.ok()) return opened.status();
  return opened->Open(*relative, O_RDONLY | O_DIRECTORY);
}

}  // namespace ringmaster::worker
