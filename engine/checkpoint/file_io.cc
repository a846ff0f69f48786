#include "engine/checkpoint/file_io.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/beneath.h"

namespace ringmaster::engine {

absl::Status ErrnoError(absl::string_view operation, absl::string_view path, int error) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrFormat("%s %s: %s (errno %d)", operation, path, std::strerror(error), error));
}

struct Sha256::Context {
  EVP_MD_CTX* ctx;
};

Sha256::Sha256() : context_(new Context{EVP_MD_CTX_new()}) {
  // Only allocation can fail here, and we do not recover from out-of-memory.
  if (context_->ctx == nullptr || EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() {
  EVP_MD_CTX_free(context_->ctx);
  delete context_;
}

void Sha256::Update(const void* data, size_t size) {
  if (size > 0 && EVP_DigestUpdate(context_->ctx, data, size) != 1) std::abort();
}

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_->ctx, digest, &length) != 1) std::abort();
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += absl::StrFormat("%02x", digest[i]);
  return hex;
}

std::string Sha256Hex(absl::string_view data) {
  Sha256 sha;
  sha.Update(data.data(), data.size());
  return sha.HexDigest();
}

DurableFileWriter::~DurableFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status DurableFileWriter::Open(const std::string& path) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return ErrnoError("open", path, errno);
  return absl::OkStatus();
}

absl::Status DurableFileWriter::OpenAt(int dir_fd, const std::string& dir_path, const std::string& name) {
  path_ = dir_path + "/" + name;
  absl::StatusOr<UniqueFd> fd = OpenEntry(dir_fd, dir_path, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (!fd.ok()) return fd.status();
  fd_ = fd->release();
  return absl::OkStatus();
}

absl::Status DurableFileWriter::Append(const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path_, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  sha_.Update(data, size);
  size_ += static_cast<int64_t>(size);
  return absl::OkStatus();
}

absl::StatusOr<FileDigest> DurableFileWriter::Finish() {
  if (::fsync(fd_) != 0) return ErrnoError("fsync", path_, errno);
  const int fd = fd_;
  fd_ = -1;
  // close can report a deferred write error (NFS); it must not be ignored.
  if (::close(fd) != 0) return ErrnoError("close", path_, errno);
  return FileDigest{size_, sha_.HexDigest()};
}

absl::StatusOr<FileDigest> WriteFileDurably(const std::string& path, absl::string_view contents) {
  DurableFileWriter writer;
  if (absl::Status status = writer.Open(path); !status.ok()) return status;
  if (absl::Status status = writer.Append(contents); !status.ok()) return status;
  return writer.Finish();
}

absl::StatusOr<FileDigest> WriteFileDurablyAt(int dir_fd, const std::string& dir_path, const std::string& name,
                                              absl::string_view contents) {
  DurableFileWriter writer;
  if (absl::Status status = writer.OpenAt(dir_fd, dir_path, name); !status.ok()) return status;
  if (absl::Status status = writer.Append(contents); !status.ok()) return status;
  return writer.Finish();
}

absl::StatusOr<std::string> ReadFd(int fd, const std::string& path) {
  std::string out;
  struct stat info;
  if (::fstat(fd, &info) == 0 && info.st_size > 0) out.reserve(static_cast<size_t>(info.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read", path, errno);
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  UniqueFd owned(fd);
  return ReadFd(fd, path);
}

absl::StatusOr<std::string> ReadFileAt(int dir_fd, const std::string& dir_path, const std::string& name) {
  absl::StatusOr<UniqueFd> fd = OpenEntry(dir_fd, dir_path, name, O_RDONLY);
  if (!fd.ok()) return fd.status();
  return ReadFd(fd->get(), dir_path + "/" + name);
}

absl::Status FsyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    return ErrnoError("fsync", path, error);
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace ringmaster::engine
