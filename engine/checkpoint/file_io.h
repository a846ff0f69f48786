#ifndef RINGMASTER_ENGINE_CHECKPOINT_FILE_IO_H_
#define RINGMASTER_ENGINE_CHECKPOINT_FILE_IO_H_

// POSIX file helpers for durable writes: every error is a Status that names
// the operation, the path and errno, with the code absl::ErrnoToStatusCode
// gives (ENOSPC -> RESOURCE_EXHAUSTED, EACCES -> PERMISSION_DENIED, ENOENT ->
// NOT_FOUND, ...). SHA-256 comes from libcrypto. The *At forms open one entry
// of an open directory without following it if it is a symbolic link
// (PERMISSION_DENIED naming it; common/beneath.h).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ringmaster::engine {

// "<operation> <path>: <strerror> (errno N)", code from errno.
absl::Status ErrnoError(absl::string_view operation, absl::string_view path, int error);

// Incremental SHA-256. Not thread-safe.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  // Lower-case hex digest (64 characters); the object is spent afterwards.
  std::string HexDigest();

 private:
  struct Context;
  Context* context_;
};

std::string Sha256Hex(absl::string_view data);

struct FileDigest {
  int64_t size = 0;
  std::string sha256;  // lower-case hex
};

// Writes a new file (created or truncated, mode 0644) and makes it durable:
// Finish() flushes it to the disk (fsync) and closes it, returning the size
// and SHA-256 of everything appended. Destroying an unfinished writer closes
// the file and leaves what was written. Not thread-safe.
class DurableFileWriter {
 public:
  DurableFileWriter() = default;
  ~DurableFileWriter();
  DurableFileWriter(const DurableFileWriter&) = delete;
  DurableFileWriter& operator=(const DurableFileWriter&) = delete;

  absl::Status Open(const std::string& path);
  // Creates the new file `name` (O_EXCL, not through a link) in the open
  // directory `dir_fd`, whose path is `dir_path` (for messages).
  absl::Status OpenAt(int dir_fd, const std::string& dir_path, const std::string& name);
  absl::Status Append(const void* data, size_t size);
  absl::Status Append(absl::string_view data) { return Append(data.data(), data.size()); }
  absl::StatusOr<FileDigest> Finish();

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
  Sha256 sha_;
};

// Open, Append(contents), Finish.
absl::StatusOr<FileDigest> WriteFileDurably(const std::string& path, absl::string_view contents);
// OpenAt, Append(contents), Finish.
absl::StatusOr<FileDigest> WriteFileDurablyAt(int dir_fd, const std::string& dir_path, const std::string& name,
                                              absl::string_view contents);

// The whole file.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// The whole file `name` of the open directory `dir_fd` (not through a link).
absl::StatusOr<std::string> ReadFileAt(int dir_fd, const std::string& dir_path, const std::string& name);
// The rest of the open file `fd` (`path` for messages).
absl::StatusOr<std::string> ReadFd(int fd, const std::string& path);

// fsync on a directory, so that entries created, renamed or removed in it are durable.
absl::Status FsyncDirectory(const std::string& path);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CHECKPOINT_FILE_IO_H_
