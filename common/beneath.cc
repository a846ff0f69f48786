#include "common/beneath.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

// Whether openat2 may be tried: cleared for good by ENOSYS (an old kernel,
// or a seccomp filter that does not know it), or by a test.
std::atomic<bool> use_openat2{true};

// A tree deeper than this is not removed (every level holds a descriptor).
constexpr int kMaxRemoveDepth = 64;

int Openat2(int dir_fd, const char* path, int flags, mode_t mode, uint64_t resolve) {
#ifdef SYS_openat2
  struct open_how how;
  std::memset(&how, 0, sizeof how);
  how.flags = static_cast<uint64_t>(flags);
  how.mode = (flags & O_CREAT) != 0 ? mode : 0;  // EINVAL otherwise
  how.resolve = resolve;
  return static_cast<int>(::syscall(SYS_openat2, dir_fd, path, &how, sizeof how));
#else
  errno = ENOSYS;
  return -1;
#endif
}

fs::path Normal(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename() && p != p.root_path()) p = p.parent_path();  // "/a/b/" -> "/a/b"
  return p;
}

std::string Join(const std::string& dir, absl::string_view name) {
  if (name.empty()) return dir;
  return dir == "/" ? absl::StrCat("/", name) : absl::StrCat(dir, "/", name);
}

// The components of `relative`, with "" and "." dropped; PERMISSION_DENIED for "..".
absl::StatusOr<std::vector<std::string>> Components(absl::string_view relative, const std::string& root) {
  if (!relative.empty() && relative.front() == '/') {
    return absl::InvalidArgumentError(absl::StrCat(relative, ": must be relative to ", root));
  }
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(relative, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      return absl::PermissionDeniedError(absl::StrCat(Join(root, relative), ": \"..\" is not allowed beneath ", root));
    }
    parts.emplace_back(part);
  }
  return parts;
}

bool IsLink(int dir_fd, const std::string& name) {
  struct stat st;
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

absl::Status LinkRefused(const std::string& full, const std::string& link, const std::string& root,
                         Symlinks symlinks) {
  if (symlinks == Symlinks::kWithinRoot) {
    // openat2 found a link leading out of the root; the walk names the first
    // link on the way.
    return absl::PermissionDeniedError(absl::StrCat(full, ": leads out of ", root, " through a symbolic link (", link,
                                                    " is one); links are followed only where they stay beneath it"));
  }
  return absl::PermissionDeniedError(absl::StrCat(full, ": ", link, " is a symbolic link; links are not followed beneath ",
                                                  root));
}

// The failure of opening `name` in `dir_fd` (`path` is dir/name): a link
// where it was refused is PERMISSION_DENIED.
absl::Status EntryError(int dir_fd, const std::string& name, const std::string& path, const std::string& full,
                        const std::string& root, int error, Symlinks symlinks = Symlinks::kRefuse) {
  if ((error == ELOOP || error == ENOTDIR || error == EEXIST || error == EMLINK) && IsLink(dir_fd, name)) {
    return LinkRefused(full, path, root, symlinks);
  }
  return PathErrno("open", path, error);
}

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

absl::Status PathErrno(absl::string_view operation, absl::string_view path, int error) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(operation, " ", path, ": ", std::strerror(error), " (errno ", error, ")"));
}

absl::StatusOr<std::string> RelativeBeneath(const std::string& path, const std::string& root) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("\"", path, "\" is not an absolute path"));
  }
  if (root.empty() || root.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("root \"", root, "\" is not an absolute path"));
  }
  const fs::path p = Normal(path), r = Normal(root);
  auto [r_end, p_end] = std::mismatch(r.begin(), r.end(), p.begin(), p.end());
  if (r_end != r.end()) return absl::PermissionDeniedError(absl::StrCat(path, " is not beneath ", r.string()));
  std::vector<std::string> rest;
  for (auto it = p_end; it != p.end(); ++it) {
    if (!it->empty()) rest.push_back(it->string());
  }
  return absl::StrJoin(rest, "/");
}

std::optional<std::string> RootOf(const std::string& path, const std::vector<std::string>& roots) {
  std::optional<std::string> best;
  size_t best_depth = 0;
  for (const std::string& root : roots) {
    if (!RelativeBeneath(path, root).ok()) continue;
    const fs::path r = Normal(root);
    const size_t depth = static_cast<size_t>(std::distance(r.begin(), r.end()));
    if (!best.has_value() || depth > best_depth) {
      best = r.string();
      best_depth = depth;
    }
  }
  return best;
}

absl::StatusOr<BeneathRoot> BeneathRoot::Open(const std::string& root, Symlinks symlinks, bool create) {
  if (root.empty() || root.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("root \"", root, "\" is not an absolute path"));
  }
  const std::string path = Normal(root).string();
  if (create) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) return PathErrno("create directory", path, ec.value());
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PathErrno("open", path, errno);
  return BeneathRoot(path, UniqueFd(fd), symlinks);
}

std::string BeneathRoot::PathOf(absl::string_view relative) const { return Join(path_, relative); }

absl::StatusOr<UniqueFd> BeneathRoot::Open(absl::string_view relative, int flags, mode_t mode) const {
  absl::StatusOr<std::vector<std::string>> parts = Components(relative, path_);
  if (!parts.ok()) return parts.status();
  const std::string clean = absl::StrJoin(*parts, "/");
  const std::string full = PathOf(clean);
  if (parts->empty()) {
    const int fd = ::openat(fd_.get(), ".", (flags & ~(O_CREAT | O_EXCL)) | O_CLOEXEC);
    if (fd < 0) return PathErrno("open", full, errno);
    return UniqueFd(fd);
  }
  // How a link is reported by the walk below.
  Symlinks report = Symlinks::kRefuse;
  if (use_openat2.load()) {
    uint64_t resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    if (symlinks_ == Symlinks::kRefuse) resolve |= RESOLVE_NO_SYMLINKS;
    int fd = -1;
    for (int attempt = 0; attempt < 8; ++attempt) {  // EAGAIN: a rename raced the lookup
      fd = Openat2(fd_.get(), clean.c_str(), flags | O_CLOEXEC, mode, resolve);
      if (fd >= 0 || errno != EAGAIN) break;
    }
    if (fd >= 0) return UniqueFd(fd);
    const int error = errno;
    if (error == ENOSYS) {
      use_openat2.store(false);  // and walk, below
    } else if (error == ELOOP || error == EXDEV) {
      // The walk names the link (or, if it was removed meanwhile, opens the
      // path without one).
      report = symlinks_;
    } else if (error != EAGAIN) {
      return PathErrno("open", full, error);
    }
  }
  // Component by component; no link is followed.
  UniqueFd current;
  int at = fd_.get();
  std::string walked = path_;
  for (size_t i = 0; i + 1 < parts->size(); ++i) {
    const std::string& name = (*parts)[i];
    const std::string path = Join(walked, name);
    const int next = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) return EntryError(at, name, path, full, path_, errno, report);
    current = UniqueFd(next);
    at = current.get();
    walked = path;
  }
  const std::string& last = parts->back();
  const int fd = ::openat(at, last.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return EntryError(at, last, Join(walked, last), full, path_, errno, report);
  return UniqueFd(fd);
}

absl::StatusOr<UniqueFd> BeneathRoot::MakeDirectories(absl::string_view relative, mode_t mode) const {
  absl::StatusOr<std::vector<std::string>> parts = Components(relative, path_);
  if (!parts.ok()) return parts.status();
  const std::string full = PathOf(absl::StrJoin(*parts, "/"));
  UniqueFd current(::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!current.valid()) return PathErrno("open", path_, errno);
  std::string walked = path_;
  for (const std::string& name : *parts) {
    const std::string path = Join(walked, name);
    if (::mkdirat(current.get(), name.c_str(), mode) == 0) {
      // Make the new entry durable (a checkpoint directory must survive a crash).
      if (absl::Status s = Fsync(current.get(), walked); !s.ok()) return s;
    } else if (errno != EEXIST) {
      return PathErrno("create directory", path, errno);
    }
    const int next = ::openat(current.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) return EntryError(current.get(), name, path, full, path_, errno);
    current = UniqueFd(next);
    walked = path;
  }
  return current;
}

absl::StatusOr<UniqueFd> OpenEntry(int dir_fd, const std::string& dir_path, absl::string_view name, int flags,
                                   mode_t mode) {
  const std::string entry(name);
  const std::string path = Join(dir_path, entry);
  if (entry.empty() || entry == "." || entry == ".." || entry.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"", entry, "\" is not a plain name"));
  }
  const int fd = ::openat(dir_fd, entry.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return EntryError(dir_fd, entry, path, path, dir_path, errno);
  return UniqueFd(fd);
}

absl::StatusOr<std::vector<DirectoryEntry>> ListDirectory(int dir_fd, const std::string& dir_path) {
  const int fd = ::dup(dir_fd);
  if (fd < 0) return PathErrno("list", dir_path, errno);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int error = errno;
    ::close(fd);
    return PathErrno("list", dir_path, error);
  }
  ::rewinddir(dir);  // the duplicate shares the offset of any earlier listing
  std::vector<DirectoryEntry> entries;
  for (;;) {
    errno = 0;
    const struct dirent* e = ::readdir(dir);
    if (e == nullptr) break;
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool is_directory = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_directory = ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    entries.push_back({name, is_directory});
  }
  const int error = errno;
  ::closedir(dir);
  if (error != 0) return PathErrno("list", dir_path, error);
  std::sort(entries.begin(), entries.end(),
            [](const DirectoryEntry& a, const DirectoryEntry& b) { return a.name < b.name; });
  return entries;
}

namespace {

absl::Status RemoveTreeAtDepth(int dir_fd, const std::string& dir_path, const std::string& name, int depth) {
  const std::string path = Join(dir_path, name);
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? absl::OkStatus() : PathErrno("remove", path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    if (depth >= kMaxRemoveDepth) {
      return absl::FailedPreconditionError(absl::StrCat("remove ", path, ": deeper than ", kMaxRemoveDepth, " levels"));
    }
    const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      UniqueFd dir(fd);
      absl::StatusOr<std::vector<DirectoryEntry>> entries = ListDirectory(dir.get(), path);
      if (!entries.ok()) return entries.status();
      for (const DirectoryEntry& e : *entries) {
        if (absl::Status s = RemoveTreeAtDepth(dir.get(), path, e.name, depth + 1); !s.ok()) return s;
      }
      if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return absl::OkStatus();
      return PathErrno("remove", path, errno);
    }
    if (errno == ENOENT) return absl::OkStatus();
    if (errno != ELOOP && errno != ENOTDIR) return PathErrno("open", path, errno);
    // Replaced by a link or a file meanwhile: removed as one, below.
  }
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) return absl::OkStatus();
  return PathErrno("remove", path, errno);
}

}  // namespace

absl::Status RemoveTreeAt(int dir_fd, const std::string& dir_path, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("remove ", Join(dir_path, name), ": not a plain name"));
  }
  return RemoveTreeAtDepth(dir_fd, dir_path, name, 0);
}

absl::Status Fsync(int fd, const std::string& path) {
  if (::fsync(fd) != 0) return PathErrno("fsync", path, errno);
  return absl::OkStatus();
}

namespace internal {
bool SetUseOpenat2(bool use) { return use_openat2.exchange(use); }
}  // namespace internal

}  // namespace ringmaster
