#include "client/connection.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "common/status_macros.h"
#include "common/tls.h"

namespace ringmaster::client {
namespace {

// Whether a gRPC target reaches only this host.
bool IsLocalTarget(const std::string& target) {
  std::string address = target;
  for (const char* scheme : {"ipv4:", "ipv6:", "dns:///", "dns:"}) {
    if (absl::StartsWith(address, scheme)) address = address.substr(std::string(scheme).size());
  }
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) return true;
  return IsLocalListenAddress(address);
}

}  // namespace

absl::Status CheckCoordinatorAddress(const std::string& target) {
  for (const char* scheme : {"unix:", "unix-abstract:", "ipv4:", "ipv6:", "dns:"}) {
    if (absl::StartsWith(target, scheme)) return absl::OkStatus();
  }
  const size_t url = target.find("://");
  if (url != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--coordinator ", target, ": a gRPC address is host:port, not a URL (",
                                                   "--coordinator ", target.substr(url + 3), ")"));
  }
  // The port follows the last ':' (after the ']' of an IPv6 literal).
  const size_t bracket = target.rfind(']');
  const size_t colon = target.rfind(':');
  const bool has_port = colon != std::string::npos && (bracket == std::string::npos || colon > bracket) &&
                        colon + 1 < target.size() &&
                        target.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  if (!has_port) {
    return absl::InvalidArgumentError(absl::StrCat("--coordinator ", target,
                                                   ": expected host:port, e.g. 127.0.0.1:50051 (no port given)"));
  }
  return absl::OkStatus();
}

std::string DefaultTokenPath(const std::string& home, const std::string& xdg_config_home) {
  if (!xdg_config_home.empty()) return xdg_config_home + "/ringmaster/token";
  return (home.empty() ? std::string("/nonexistent") : home) + "/.config/ringmaster/token";
}

absl::StatusOr<std::string> LoadToken(const ConnectionOptions& options) {
  if (!options.token_file.empty()) return ReadSecretFile(options.token_file, "--token-file");
  const std::string path = DefaultTokenPath(options.home, options.xdg_config_home);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::string();
  return ReadSecretFile(path, "token file");
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectToCoordinator(const ConnectionOptions& options) {
  RETURN_IF_ERROR(CheckCoordinatorAddress(options.coordinator));
  std::unique_ptr<TlsMaterial> tls;
  if (!options.tls_ca.empty()) {
    ASSIGN_OR_RETURN(TlsMaterial loaded, LoadTlsMaterial({options.tls_ca, "", ""}, /*require_identity=*/false));
    tls = std::make_unique<TlsMaterial>(std::move(loaded));
  } else if (!IsLocalTarget(options.coordinator)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--coordinator ", options.coordinator,
        " is not on this host: pass the cluster's CA with --tls-ca (or RINGMASTER_TLS_CA); see docs/security.md"));
  }
  ASSIGN_OR_RETURN(std::string token, LoadToken(options));
  Headers headers;
  if (!token.empty()) headers.emplace_back(kAuthorizationHeader, "Bearer " + token);
  return MakeChannel(options.coordinator, MakeChannelCredentials(tls.get()), grpc::ChannelArguments(),
                     std::move(headers));
}

}  // namespace ringmaster::client
