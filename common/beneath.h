#ifndef RINGMASTER_COMMON_BENEATH_H_
#define RINGMASTER_COMMON_BENEATH_H_

// Opening files and directories beneath a root without following symbolic
// links: the worker's job directories, checkpoint directories and data sets
// (docs/security.md, "What a job may touch").
//
// A root is an operator's directory (--checkpoint-root, --data-roots, the
// worker's --state-dir): trusted, so a symbolic link in its own path is
// followed when it is opened. Everything below it may have been made by a
// job, so each open walks from the root's descriptor:
//   - openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, plus
//     RESOLVE_NO_SYMLINKS unless links within the root are allowed) where
//     the kernel has it (Linux >= 5.6);
//   - otherwise openat(O_NOFOLLOW | O_DIRECTORY) component by component,
//     which follows no symbolic link at all.
// A symbolic link where none may be, or one that leads out of the root, is
// PERMISSION_DENIED naming the path and the link; ".." is never accepted.
// Other failures carry the errno's code (absl::ErrnoToStatusCode) and name
// the path. Stateless and thread-safe.

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

enum class Symlinks {
  kRefuse,      // none anywhere beneath the root (checkpoints, job directories)
  kWithinRoot,  // relative links that stay beneath the root are followed (a
                // data set's own links); without openat2, none are
};

// "<operation> <path>: <strerror> (errno N)", code from errno.
absl::Status PathErrno(absl::string_view operation, absl::string_view path, int error);

// `path` relative to `root`, by components after lexical normalisation
// ("/r/a/./b" under "/r" is "a/b"; "/r" itself is ""). INVALID_ARGUMENT for a
// relative path; PERMISSION_DENIED when it does not lie within the root.
absl::StatusOr<std::string> RelativeBeneath(const std::string& path, const std::string& root);

// Of `roots`, the one that holds `path` with the most components (see
// RelativeBeneath); none when no root holds it.
std::optional<std::string> RootOf(const std::string& path, const std::vector<std::string>& roots);

// A directory opened as a root, and what lies beneath it. Movable.
class BeneathRoot {
 public:
  // Opens `root` (absolute; links in its own path followed). `create` makes
  // it first where it is missing.
  static absl::StatusOr<BeneathRoot> Open(const std::string& root, Symlinks symlinks, bool create = false);

  // Opens `relative` (under the root, no ".."; "" is the root itself) with
  // `flags` (O_RDONLY, O_DIRECTORY, O_WRONLY | O_CREAT | O_EXCL, ...; O_CLOEXEC
  // is added) and `mode` for a file it creates.
  absl::StatusOr<UniqueFd> Open(absl::string_view relative, int flags, mode_t mode = 0) const;
  // Creates the missing directories of `relative` (each `mode`, their parents
  // fsynced), opening every component without following a link, and returns
  // the last one open (O_RDONLY | O_DIRECTORY).
  absl::StatusOr<UniqueFd> MakeDirectories(absl::string_view relative, mode_t mode) const;

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }
  // path()/relative, for messages.
  std::string PathOf(absl::string_view relative) const;

 private:
  BeneathRoot(std::string path, UniqueFd fd, Symlinks symlinks)
      : path_(std::move(path)), fd_(std::move(fd)), symlinks_(symlinks) {}

  std::string path_;
  UniqueFd fd_;
  Symlinks symlinks_;
};

// Opens the single entry `name` (no '/') of the open directory `dir_fd`
// without following it if it is a link: PERMISSION_DENIED naming
// `dir_path`/`name` then. `flags` and `mode` as for BeneathRoot::Open.
absl::StatusOr<UniqueFd> OpenEntry(int dir_fd, const std::string& dir_path, absl::string_view name, int flags,
                                   mode_t mode = 0);

// Removes the entry `name` of `dir_fd` and, if it is a directory, everything
// in it, never following a link (a link is removed, not what it points to).
// A missing entry is OK.
absl::Status RemoveTreeAt(int dir_fd, const std::string& dir_path, const std::string& name);

// The names in the open directory `dir_fd` (not "." or ".."), each with
// whether it is a directory itself (a link to one is not).
struct DirectoryEntry {
  std::string name;
  bool is_directory = false;
};
absl::StatusOr<std::vector<DirectoryEntry>> ListDirectory(int dir_fd, const std::string& dir_path);

// fsync of an open file or directory.
absl::Status Fsync(int fd, const std::string& path);

namespace internal {
// Tests: false makes every open take the component-by-component walk, as on
// a kernel without openat2. Returns the previous setting.
bool SetUseOpenat2(bool use);
}  // namespace internal

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_BENEATH_H_
