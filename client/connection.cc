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
