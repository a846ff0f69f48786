#ifndef RINGMASTER_COMMON_GRPC_SECURITY_H_
#define RINGMASTER_COMMON_GRPC_SECURITY_H_

// gRPC credentials and channels for Ringmaster's processes (docs/security.md).
//
// Server (the coordinator):
//   - with TLS: the server certificate, and a client certificate REQUESTED
//     but not verified in the handshake; the coordinator verifies it per call
//     (coordinator/auth_processor.h, common/tls.h VerifyPeerCertificate), so
//     that a worker with a missing, expired or foreign certificate gets
//     UNAUTHENTICATED with the reason instead of a failed handshake;
//   - without TLS: local credentials (loopback TCP, or a Unix socket), which
//     refuse any connection from another host.
// Channels (CLI, worker): TLS verifying the server against the CA (there is
// no option to skip that), with the client's certificate when it has one;
// or plaintext for a loopback coordinator. Every channel gets explicit
// message size limits and, through an interceptor, the caller's credential
// headers on every call (plaintext channels included, where gRPC would not
// send call credentials).

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/tls.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster {

// Largest gRPC message sent or received, both ways (a LogChunk is at most
// 256 lines of 64 KiB plus framing).
inline constexpr int kMaxGrpcMessageBytes = 32 << 20;

// Metadata keys. The CLI sends "authorization: Bearer <token>"; a worker
// sends its join token.
inline constexpr char kAuthorizationHeader[] = "authorization";
inline constexpr char kJoinTokenHeader[] = "x-ringmaster-join-token";
// A worker's node credential (RegisterNodeResponse.credential): which node
// calls, on every NodeService, RendezvousService and CheckpointService call.
inline constexpr char kNodeCredentialHeader[] = "x-ringmaster-node-credential";
// A trainer's generation secret (RankContext.rendezvous.secret) on its calls
// to its worker's agent socket, which any local process can reach: the worker
// commits, reports and reads checkpoints for a job only when the caller
// presents the secret its ranks were started with.
inline constexpr char kRankSecretHeader[] = "x-ringmaster-rank-secret";

using Headers = std::vector<std::pair<std::string, std::string>>;
// Headers computed for each call (a credential that arrives or changes after
// the channel is made). Called on gRPC's threads: must be thread-safe and
// must not block.
using HeaderSource = std::function<Headers()>;

// `tls` null: local credentials for `listen` (unix:... or a loopback host).
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsMaterial* tls, const std::string& listen);

// `tls` null: plaintext.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const TlsMaterial* tls);

// A channel to `target` with `args`, kMaxGrpcMessageBytes both ways and
// `headers` added to every call.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                           grpc::ChannelArguments args, Headers headers);
// The same, with `source`'s headers too, asked for at each call.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                           grpc::ChannelArguments args, Headers headers, HeaderSource source);

// Whether the message of a gRPC UNAVAILABLE status says that the TLS
// handshake failed (the server's certificate is not trusted, the server
// does not speak TLS, ...) rather than that nobody answered.
bool IsTlsHandshakeFailure(const std::string& grpc_message);

// Whether `host` (no port) is a loopback address or "localhost".
bool IsLoopbackHost(const std::string& host);

// Whether a listen address ("host:port", "[v6]:port", "unix:PATH") accepts
// only local connections. "0.0.0.0:50051", ":50051" and host names other
// than localhost are not local.
bool IsLocalListenAddress(const std::string& address);

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_GRPC_SECURITY_H_
