#include "engine/data/data_file.h"

#include <fcntl.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace ringmaster::engine {

absl::StatusOr<UniqueFd> OpenDataFile(const std::string& path, const std::string& root) {
  if (root.empty()) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PathErrno("open", path, errno);
    return UniqueFd(fd);
  }
  absl::StatusOr<std::string> relative = RelativeBeneath(path, root);
  if (!relative.ok()) {
    return absl::PermissionDeniedError(absl::StrCat(path, " is not beneath the data root ", root));
  }
  absl::StatusOr<BeneathRoot> opened = BeneathRoot::Open(root, Symlinks::kWithinRoot);
  if (!opened.ok()) return opened.status();
  return opened->Open(*relative, O_RDONLY);
}

}  // namespace ringmaster::engine
