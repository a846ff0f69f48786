#ifndef RINGMASTER_CLIENT_CONNECTION_H_
#define RINGMASTER_CLIENT_CONNECTION_H_

// The CLI's channel to the coordinator (docs/security.md):
//   - TLS when --tls-ca (RINGMASTER_TLS_CA) names the CA the coordinator's
//     certificate must chain to; the certificate is always verified. Without
//     it the coordinator must be local (loopback or unix:), so that a token
//     never crosses a network in clear.
//   - The user's bearer token, read from --token-file, RINGMASTER_TOKEN_FILE
//     or ~/.config/ringmaster/token ($XDG_CONFIG_HOME/ringmaster/token), goes
//     with every call ("authorization: Bearer <token>"). The file must not
//     be readable by group or others. The default file may be absent (no
//     token is sent: fine for a coordinator that authenticates no users);
//     a file named explicitly must exist.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {

struct ConnectionOptions {
  std::string coordinator;  // gRPC target
  std::string tls_ca;       // empty: plaintext (local coordinators only)
  std::string token_file;   // empty: the default path, optional
  std::string home;         // $HOME
  std::string xdg_config_home;  // $XDG_CONFIG_HOME
};

// ~/.config/ringmaster/token, or under $XDG_CONFIG_HOME when set.
std::string DefaultTokenPath(const std::string& home, const std::string& xdg_config_home);

// The token ("" when the default file is absent). Errors name the file,
// never the token.
absl::StatusOr<std::string> LoadToken(const ConnectionOptions& options);

// OK for a gRPC target: host:port, [v6]:port, unix:PATH, or one with a gRPC
// scheme (ipv4:, ipv6:, dns:, unix-abstract:). INVALID_ARGUMENT naming
// --coordinator and the fix otherwise: a URL (http://h:p), no port.
absl::Status CheckCoordinatorAddress(const std::string& target);

// The channel, or INVALID_ARGUMENT/NOT_FOUND/PERMISSION_DENIED naming the
// flag (a malformed address, a non-local coordinator without --tls-ca, an
// unreadable CA or token file).
absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectToCoordinator(const ConnectionOptions& options);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_CONNECTION_H_
