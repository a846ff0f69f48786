#include "engine/dist/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ringmaster::engine::dist {
namespace {

constexpr absl::Duration kFirstBackoff = absl::Milliseconds(1);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(50);
// Keys whose hex form would exceed this many characters are shortened.
constexpr size_t kMaxPlainKeyBytes = 100;

absl::Status FileError(const std::string& what, int err) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(message);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT: return absl::ResourceExhaustedError(message);
    default: return absl::InternalError(message);
  }
}

uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// A file-name-safe, collision-free (up to the hash) encoding of `key`.
std::string EncodeKey(const std::string& key) {
  if (key.size() <= kMaxPlainKeyBytes) return absl::StrCat("k.", absl::BytesToHexString(key));
  return absl::StrCat("h.", absl::BytesToHexString(key.substr(0, 40)), ".",
                      absl::Hex(Fnv1a64(key), absl::kZeroPad16), ".", key.size());
}

std::string Quoted(const std::string& key) { return absl::StrCat("'", absl::CHexEscape(key), "'"); }

// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

absl::Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FileError(absl::StrCat("write ", path), errno);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Create(const std::string& directory,
                                                             Clock* clock) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return FileError(absl::StrCat("file store: create directory ", directory), error.value());
  }
  return std::unique_ptr<FileStore>(new FileStore(directory, clock ? clock : Clock::Real()));
}

std::string FileStore::PathOf(const std::string& key) const {
  return absl::StrCat(directory_, "/", EncodeKey(key));
}

absl::StatusOr<std::string> FileStore::Read(const std::string& key) const {
  const std::string path = PathOf(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError(absl::StrCat("file store: open ", path), errno);
  FdCloser closer(fd);
  std::string value;
  char buffer[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FileError(absl::StrCat("file store: read ", path), errno);
    if (n == 0) return value;
    value.append(buffer, static_cast<size_t>(n));
  }
}

absl::Status FileStore::Write(const std::string& key, const std::string& value) {
  static std::atomic<uint64_t> counter{0};
  const std::string path = PathOf(key);
  const std::string temp =
      absl::StrCat(directory_, "/t.", ::getpid(), ".",
                   std::hash<std::thread::id>()(std::this_thread::get_id()), ".", counter++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return FileError(absl::StrCat("file store: create ", temp), errno);
  absl::Status written = WriteAll(fd, value, temp);
  if (::close(fd) != 0 && written.ok()) {
    written = FileError(absl::StrCat("file store: close ", temp), errno);
  }
  if (written.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = FileError(absl::StrCat("file store: rename ", temp, " to ", path), errno);
  }
  if (!written.ok()) ::unlink(temp.c_str());
  return written;
}

absl::Status FileStore::Set(const std::string& key, const std::string& value) {
  return Write(key, value);
}

absl::StatusOr<std::string> FileStore::Get(const std::string& key, absl::Duration timeout) {
  RETURN_IF_ERROR(Wait({key}, timeout));
  return Read(key);
}

absl::Status FileStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  Deadline deadline(clock_, timeout);
  absl::Duration backoff = kFirstBackoff;
  for (;;) {
    std::vector<std::string> missing;
    for (const std::string& key : keys) {
      if (::access(PathOf(key).c_str(), F_OK) == 0) continue;
      if (errno != ENOENT) return FileError(absl::StrCat("file store: access ", PathOf(key)), errno);
      missing.push_back(key);
    }
    if (missing.empty()) return absl::OkStatus();
    if (deadline.Expired()) {
      std::vector<std::string> quoted;
      for (const std::string& key : missing) quoted.push_back(Quoted(key));
      return absl::DeadlineExceededError(
          absl::StrCat("file store ", directory_, ": ", missing.size() == 1 ? "key " : "keys ",
                       absl::StrJoin(quoted, ", "), missing.size() == 1 ? " was" : " were",
                       " not set within ", absl::FormatDuration(timeout)));
    }
    clock_->SleepUntil(std::min(clock_->Now() + backoff, deadline.at()));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::StatusOr<int64_t> FileStore::Add(const std::string& key, int64_t delta) {
  const std::string lock_path = absl::StrCat(directory_, "/l.", EncodeKey(key).substr(2));
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return FileError(absl::StrCat("file store: open ", lock_path), errno);
  FdCloser closer(fd);  // closing the descriptor releases the lock
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return FileError(absl::StrCat("file store: flock ", lock_path), errno);
  }
  int64_t value = 0;
  absl::StatusOr<std::string> current = Read(key);
  if (current.ok()) {
    if (!absl::SimpleAtoi(*current, &value)) {
      return absl::InvalidArgumentError(absl::StrCat("file store ", directory_, ": add to key ",
                                                     Quoted(key), " holding ",
                                                     Quoted(current->substr(0, 32)),
                                                     ", which is not an integer"));
    }
  } else if (!absl::IsNotFound(current.status())) {
    return current.status();
  }
  if (__builtin_add_overflow(value, delta, &value)) {
    return absl::OutOfRangeError(absl::StrCat("file store ", directory_, ": add ", delta,
                                              " to key ", Quoted(key), " overflows int64"));
  }
  RETURN_IF_ERROR(Write(key, absl::StrCat(value)));
  return value;
}

}  // namespace ringmaster::engine::dist
