#include "worker/node_credential.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/tls.h"

namespace ringmaster::worker {
namespace {

bool IsCredential(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

NodeCredential::NodeCredential(std::string path) : path_(std::move(path)) {}

absl::Status NodeCredential::Load() {
  if (path_.empty()) return absl::OkStatus();
  struct stat st;
  if (lstat(path_.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();  // none yet: the first registration issues one
    return Errno("read", path_);
  }
  absl::StatusOr<std::string> read = ReadSecretFile(path_, path_);
  if (!read.ok()) return read.status();
  if (!IsCredential(*read)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": not a node credential (64 hex digits); remove it and the node-id file beside it to "
                            "register as a new node"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  credential_ = *std::move(read);
  return absl::OkStatus();
}

absl::Status NodeCredential::Set(const std::string& credential) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    credential_ = credential;
  }
  if (path_.empty()) return absl::OkStatus();
  const std::string tmp = path_ + ".tmp";
  unlink(tmp.c_str());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("write", tmp);
  const std::string text = credential + "\n";
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  const absl::Status write_error = written ? absl::OkStatus() : Errno("write", tmp);
  close(fd);
  if (!written) {
    unlink(tmp.c_str());
    return write_error;
  }
  if (rename(tmp.c_str(), path_.c_str()) != 0) {
    absl::Status s = Errno("replace", path_);
    unlink(tmp.c_str());
    return s;
  }
  return absl::OkStatus();
}

std::string NodeCredential::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return credential_;
}

Headers NodeCredential::CallHeaders() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (credential_.empty()) return {};
  return {{kNodeCredentialHeader, credential_}};
}

}  // namespace ringmaster::worker
