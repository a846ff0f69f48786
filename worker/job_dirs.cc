#include "worker/job_dirs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/beneath.h"
#include "common/status_macros.h"
#include "worker/job_roots.h"
#include "worker/paths.h"

namespace ringmaster::worker {
namespace {

constexpr int kMaxDepth = 256;

absl::StatusOr<UniqueFd> OpenDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PathErrno("open", path, errno);
  return UniqueFd(fd);
}

// `name` in `parent`, made (mode) if missing, opened without following a
// link (a link or a file there is refused) as a path only (O_PATH: for *at()
// calls and fstat), which needs no permission on the directory itself: a
// worker without CAP_DAC_OVERRIDE (Kubernetes) opens an account's 0700
// directory so, and works in it as the account.
absl::StatusOr<UniqueFd> MakeDirAt(int parent, const std::string& parent_path, const std::string& name,
                                   mode_t mode) {
  if (::mkdirat(parent, name.c_str(), mode) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(PathErrno("create", absl::StrCat(parent_path, "/", name), errno).message());
  }
  return OpenEntry(parent, parent_path, name, O_PATH | O_DIRECTORY);
}

// Makes the directory `fd` (`path`) the account's: given to it when it is
// the worker's; refused when it is a third account's.
absl::Status GiveTo(int fd, const std::string& path, const RunAccount& account) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return PathErrno("stat", path, errno);
  if (st.st_uid == account.uid) return absl::OkStatus();
  if (st.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(path, " belongs to uid ", st.st_uid, ", not to ", account.name,
                                                      " (uid ", account.uid, "): was the account map changed?"));
  }
  // The worker's own: opened for real (`fd` may be O_PATH), made private
  // first, while the worker still owns it (no CAP_FOWNER needed), then given.
  const int own = ::openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (own < 0) return PathErrno("open", path, errno);
  UniqueFd dir(own);
  if (::fchmod(dir.get(), 0700) != 0) return PathErrno("chmod", path, errno);
  if (::fchown(dir.get(), account.uid, account.gid) != 0) {
    const int error = errno;
    return absl::FailedPreconditionError(absl::StrCat("cannot give ", path, " to ", account.name, ": ",
                                                    std::strerror(error),
                                                    " (the worker needs CAP_CHOWN; a root-squashed NFS export "
                                                    "refuses it)"));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAt(int dir, const std::string& dir_path, const std::string& name, const std::string& content) {
  const std::string tmp = name + ".tmp";
  const int fd = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return PathErrno("create", absl::StrCat(dir_path, "/", tmp), errno);
  UniqueFd file(fd);
  if (::fchmod(file.get(), 0600) != 0) return PathErrno("chmod", absl::StrCat(dir_path, "/", tmp), errno);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(file.get(), content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return PathErrno("write", absl::StrCat(dir_path, "/", tmp), errno);
    done += static_cast<size_t>(n);
  }
  if (::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
    return PathErrno("rename", absl::StrCat(dir_path, "/", tmp), errno);
  }
  return absl::OkStatus();
}

// Everything in `dir` (open; `path`), as whoever this thread acts as.
absl::Status RemoveContents(int dir, const std::string& path, int depth) {
  if (depth > kMaxDepth) return absl::FailedPreconditionError(absl::StrCat("remove ", path, ": too deep"));
  ASSIGN_OR_RETURN(std::vector<DirectoryEntry> entries, ListDirectory(dir, path));
  for (const DirectoryEntry& e : entries) {
    const std::string child = absl::StrCat(path, "/", e.name);
    struct stat st;
    if (::fstatat(dir, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return PathErrno("stat", child, errno);
    }
    if (S_ISDIR(st.st_mode)) {
      int fd = ::openat(dir, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 && errno == EACCES) {
        // A directory its owner made unreadable: the owner may open it up.
        ::fchmodat(dir, e.name.c_str(), 0700, 0);
        fd = ::openat(dir, e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
      if (fd < 0 && errno != ELOOP && errno != ENOTDIR) return PathErrno("open", child, errno);
      if (fd >= 0) {
        UniqueFd sub(fd);
        RETURN_IF_ERROR(RemoveContents(sub.get(), child, depth + 1));
        if (::unlinkat(dir, e.name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
          return PathErrno("remove", child, errno);
        }
        continue;
      }
    }
    if (::unlinkat(dir, e.name.c_str(), 0) != 0 && errno != ENOENT) return PathErrno("remove", child, errno);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RankFiles> PrepareRankFiles(const std::string& state_dir, const std::string& job_id,
                                           int64_t generation, int32_t rank, const RunAccount& account,
                                           const std::string& context) {
  const std::string ranks_dir = RanksDir(state_dir);
  if (::mkdir(ranks_dir.c_str(), 0700) != 0 && errno != EEXIST) return PathErrno("create", ranks_dir, errno);
  ASSIGN_OR_RETURN(UniqueFd ranks, OpenDirectory(ranks_dir));
  const std::string job_dir = JobPrivateDir(state_dir, job_id);
  ASSIGN_OR_RETURN(UniqueFd job, MakeDirAt(ranks.get(), ranks_dir, job_id, 0700));
  RETURN_IF_ERROR(GiveTo(job.get(), job_dir, account));

  RankFiles files;
  files.tmp_dir = JobTmpDir(state_dir, job_id);
  files.work_dir = RankWorkDir(state_dir, job_id, generation, rank);
  files.context_path = files.work_dir + "/rank.json";
  ScopedFsIdentity as_account(account);
  if (!as_account.ok()) return as_account.status();
  ASSIGN_OR_RETURN(UniqueFd tmp, MakeDirAt(job.get(), job_dir, "tmp", 0700));
  const std::string gen_name = absl::StrCat("gen-", generation);
  const std::string gen_dir = absl::StrCat(job_dir, "/", gen_name);
  ASSIGN_OR_RETURN(UniqueFd gen, MakeDirAt(job.get(), job_dir, gen_name, 0700));
  ASSIGN_OR_RETURN(UniqueFd work, MakeDirAt(gen.get(), gen_dir, absl::StrCat("rank-", rank), 0700));
  RETURN_IF_ERROR(WriteFileAt(work.get(), files.work_dir, "rank.json", context));
  return files;
}

absl::Status PrepareCheckpointDir(const std::string& checkpoint_dir, const std::vector<std::string>& checkpoint_roots,
                                  const RunAccount& account) {
  if (account.is_worker || checkpoint_dir.empty()) return absl::OkStatus();
  std::filesystem::path dir = std::filesystem::path(checkpoint_dir).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();
  const std::filesystem::path job_dir = dir.parent_path();
  const std::filesystem::path root = job_dir.parent_path();
  if (!dir.is_absolute() || job_dir == root || !job_dir.has_filename()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint_dir: ", checkpoint_dir, " is not <root>/<job>/gen-<generation>"));
  }
  absl::StatusOr<UniqueFd> root_fd = OpenCheckpointDirectory(root.string(), checkpoint_roots);
  if (!root_fd.ok() && root_fd.status().code() == absl::StatusCode::kPermissionDenied) return root_fd.status();
  if (!root_fd.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint root: ", root_fd.status().message(), " (the operator makes it)"));
  }
  const std::string job_name = job_dir.filename().string();
  {
    // Made as the account where the root lets it (a sticky 1733 root on NFS,
    // whose server refuses the worker's chown); else by the worker, below,
    // and given to the account.
    ScopedFsIdentity as_account(account);
    if (!as_account.ok()) return as_account.status();
    if (::mkdirat(root_fd->get(), job_name.c_str(), 0700) != 0 && errno != EEXIST && errno != EACCES &&
        errno != EPERM) {
      return absl::FailedPreconditionError(PathErrno("create", job_dir.string(), errno).message());
    }
  }
  ASSIGN_OR_RETURN(UniqueFd job, MakeDirAt(root_fd->get(), root.string(), job_name, 0700));
  RETURN_IF_ERROR(GiveTo(job.get(), job_dir.string(), account));
  ScopedFsIdentity as_account(account);
  if (!as_account.ok()) return as_account.status();
  ASSIGN_OR_RETURN(UniqueFd gen, MakeDirAt(job.get(), job_dir.string(), dir.filename().string(), 0700));
  return absl::OkStatus();
}

absl::Status RemoveOwnedTree(const std::string& dir, const std::string& name) {
  ASSIGN_OR_RETURN(UniqueFd parent, OpenDirectory(dir));
  const std::string path = absl::StrCat(dir, "/", name);
  struct stat st;
  if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? absl::OkStatus() : PathErrno("stat", path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    RunAccount owner;
    owner.uid = st.st_uid;
    owner.gid = st.st_gid;
    owner.name = absl::StrCat("uid ", st.st_uid);
    owner.is_worker = st.st_uid == ::geteuid();
    {
      ScopedFsIdentity as_owner(owner);
      if (!as_owner.ok()) return as_owner.status();
      absl::StatusOr<UniqueFd> tree = OpenEntry(parent.get(), dir, name, O_RDONLY | O_DIRECTORY);
      if (!tree.ok() && ::fchmodat(parent.get(), name.c_str(), 0700, 0) == 0) {
        tree = OpenEntry(parent.get(), dir, name, O_RDONLY | O_DIRECTORY);  // its owner had closed it
      }
      if (!tree.ok()) return tree.status();
      RETURN_IF_ERROR(RemoveContents(tree->get(), path, 0));
    }
    // The (now empty) directory is an entry of the worker's own `dir`.
    if (::unlinkat(parent.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return PathErrno("remove", path, errno);
    }
    return absl::OkStatus();
  }
  if (::unlinkat(parent.get(), name.c_str(), 0) != 0 && errno != ENOENT) return PathErrno("remove", path, errno);
  return absl::OkStatus();
}

}  // namespace ringmaster::worker
