#ifndef RINGMASTER_COORDINATOR_AUTH_H_
#define RINGMASTER_COORDINATOR_AUTH_H_

// Who may call what on the coordinator (docs/security.md). Core logic, no
// gRPC: coordinator/auth_processor.h feeds it each call's headers and peer
// certificate and applies its answer.
//
// Callers:
//   - users (the CLI) present "authorization: Bearer <token>"; the token file
//     maps tokens to user names (TokenTable). Every JobService call needs a
//     valid token (read-only calls too: any valid token may read every job);
//     Submit records the user as the job's owner; CancelJob needs the owner
//     or an admin (AuthorizeCancel).
//   - workers present the join token ("x-ringmaster-join-token") and, when
//     TLS is on, a client certificate issued by the cluster CA, on every
//     NodeService, RendezvousService and CheckpointService call (a worker
//     forwards its trainers' rendezvous and checkpoint calls). That admits a
//     worker; which node it is, is its node credential's to say
//     (NodeRegistry::AuthenticateNode, checked by those services:
//     coordinator/service/node_identity.h).
//   - health checks need nothing; server reflection is a read-only user call;
//     any other method is PERMISSION_DENIED.
// Without a token file users are not authenticated (every JobService call is
// allowed and jobs have no owner); without a join token workers need only
// their certificate (TLS) or nothing (loopback). The coordinator allows those
// modes on a loopback listen address only (coordinator_server.h).
//
// Errors: UNAUTHENTICATED (no or bad credentials, with the reason, never the
// secret itself), PERMISSION_DENIED (valid credentials, not allowed).
//
// Thread-safe: immutable after construction.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "coordinator/core/queue_config.h"

namespace ringmaster::coordinator {

struct TokenUser {
  std::string name;
  bool admin = false;  // may cancel every user's jobs
};

// The users' token file, one user per line:
//
//   # comment
//   sha256:<64 hex digits of SHA-256(token)>  alice
//   <the token itself, 16+ characters>        bob    admin
//
// Tokens are kept only as SHA-256 hashes; a presented token is hashed and
// compared with every entry in constant time.
class TokenTable {
 public:
  // INVALID_ARGUMENT naming `origin` and the line (never the token).
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, const std::string& origin);

  // The token's user; nullopt if it is nobody's.
  std::optional<TokenUser> Authenticate(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string sha256_hex;
    TokenUser user;
  };
  std::vector<Entry> entries_;
};

// What the coordinator requires.
struct AuthPolicy {
  // Users' tokens; nullopt: users are not authenticated.
  std::optional<TokenTable> users;
  // SHA-256 (hex) of the workers' join token; empty: none required.
  std::string join_token_sha256;
  // The cluster CA (PEM); non-empty: worker calls need a client certificate
  // issued by it, valid now.
  std::string client_ca_pem;
};

// What one call presented.
struct CallCredentials {
  std::string method;           // "/ringmaster.v1.JobService/Submit"
  std::string authorization;    // the authorization header; empty if absent
  std::string join_token;       // the join token header; empty if absent
  std::string client_cert_pem;  // the peer's TLS certificate; empty if none
};

// Who the caller is, once authenticated.
struct Caller {
  std::string user;  // empty: a worker, a health check, or users unauthenticated
  bool admin = false;
  bool worker = false;
};

enum class MethodKind { kPublic, kUser, kWorker, kUnknown };

// Which kind of caller a full method name is for.
MethodKind ClassifyMethod(absl::string_view method);

class Authenticator {
 public:
  // `clock` (certificate validity) must outlive the authenticator.
  Authenticator(AuthPolicy policy, const Clock* clock);

  absl::StatusOr<Caller> Authenticate(const CallCredentials& call) const;

  bool authenticates_users() const { return policy_.users.has_value(); }

 private:
  absl::StatusOr<Caller> AuthenticateUser(const CallCredentials& call) const;
  absl::StatusOr<Caller> AuthenticateWorker(const CallCredentials& call) const;

  const AuthPolicy policy_;
  const Clock* const clock_;
};

// May `caller` cancel a job owned by `owner`? The owner and admins may; so
// may anyone when the job has no owner and users are not authenticated
// (caller.user empty). PERMISSION_DENIED otherwise, naming the owner.
absl::Status AuthorizeCancel(const Caller& caller, const std::string& owner, const std::string& job_id);

// May `caller` cordon, uncordon or drain nodes (`what`)? Admins may; so may
// anyone when users are not authenticated (caller.user empty).
// PERMISSION_DENIED otherwise.
absl::Status AuthorizeNodeAdmin(const Caller& caller, absl::string_view what);
// Who a cordon records: the caller's user name, or "operator" when users are
// not authenticated.
std::string OperatorName(const Caller& caller);

// Who may read a job (the coordinator's --visibility): kTeam, its owner, its
// queue's members and admins; kOpen, every user.
enum class Visibility { kTeam, kOpen };
// "team" or "open"; INVALID_ARGUMENT otherwise (the caller names its flag).
absl::StatusOr<Visibility> ParseVisibility(absl::string_view text);

// The parts of a job that decide who may read it.
struct JobReadScope {
  std::string job_id;
  std::string owner;  // empty: submitted while users were not authenticated
  std::string queue;  // the spec's queue; empty (a job from before queues): "default"
};

// May `caller` read the job (describe, timeline, logs, checkpoints)? Yes with
// kOpen, when users are not authenticated (caller.user empty), for admins,
// for its owner, and for members of its queue in `queues` (the config in
// force; a queue no longer configured has no members). PERMISSION_DENIED
// otherwise, naming the job, its queue and the caller.
absl::Status AuthorizeRead(const Caller& caller, const JobReadScope& job, const QueueConfig& queues,
                           Visibility visibility);

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_AUTH_H_
