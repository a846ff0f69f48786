#include "coordinator/core/rendezvous_secrets.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tls.h"

namespace ringmaster::coordinator {

absl::StatusOr<std::unique_ptr<RendezvousSecrets>> RendezvousSecrets::LoadOrCreate(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    absl::StatusOr<std::string> key = RandomHex(32);
    if (!key.ok()) {
      ::close(fd);
      ::unlink(path.c_str());
      return key.status();
    }
    const std::string line = *key + "\n";
    const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!written) {
      ::unlink(path.c_str());
      return absl::UnavailableError(absl::StrCat("cannot write the rendezvous key ", path));
    }
  } else if (errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat("cannot create the rendezvous key ", path, ": ", std::strerror(errno)));
  }
  ASSIGN_OR_RETURN(std::string hex, ReadSecretFile(path, "rendezvous key"));
  std::string key = absl::HexStringToBytes(hex);
  if (hex.size() != 64 || absl::BytesToHexString(key) != absl::AsciiStrToLower(hex)) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key ", path, ": expected 64 hex digits"));
  }
  return std::make_unique<RendezvousSecrets>(std::move(key));
}

std::string RendezvousSecrets::For(const std::string& job_id, int64_t generation) const {
  const std::string message = absl::StrCat(job_id, "\n", generation);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), mac, &length);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac), length));
}

absl::Status RendezvousSecrets::Check(const std::string& job_id, int64_t generation,
                                      const std::string& presented) const {
  if (presented.empty()) {
    return absl::PermissionDeniedError(
        "no rendezvous secret: ranks get theirs from their worker (RINGMASTER_RENDEZVOUS_SECRET)");
  }
  if (!ConstantTimeEquals(For(job_id, generation), presented)) {
    return absl::PermissionDeniedError(absl::StrCat("wrong rendezvous secret for generation ", generation,
                                                    " of job ", job_id));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::coordinator
