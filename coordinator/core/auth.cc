#include "coordinator/core/auth.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/tls.h"

namespace ringmaster::coordinator {
namespace {

constexpr size_t kMinTokenLength = 16;
constexpr absl::string_view kHashPrefix = "sha256:";

bool IsHex64(absl::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool IsUserName(absl::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' && c != '@') {
      return false;
    }
  }
  return true;
}

// The token of an "authorization: Bearer <token>" header; empty if none.
absl::string_view BearerToken(absl::string_view header) {
  header = absl::StripAsciiWhitespace(header);
  if (!absl::StartsWithIgnoreCase(header, "bearer ")) return {};
  return absl::StripAsciiWhitespace(header.substr(7));
}

}  // namespace

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, const std::string& origin) {
  TokenTable table;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(origin, ": line ", line_number, ": ");
    if (fields.size() < 2 || fields.size() > 3) {
      return absl::InvalidArgumentError(absl::StrCat(where, "expected \"<token or sha256:HEX> <user> [admin]\""));
    }
    Entry entry;
    if (absl::StartsWith(fields[0], kHashPrefix)) {
      absl::string_view hex = fields[0].substr(kHashPrefix.size());
      if (!IsHex64(hex)) return absl::InvalidArgumentError(absl::StrCat(where, "sha256: needs 64 hex digits"));
      entry.sha256_hex = absl::AsciiStrToLower(hex);
    } else {
      if (fields[0].size() < kMinTokenLength) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "a token must be at least ", kMinTokenLength, " characters"));
      }
      entry.sha256_hex = Sha256Hex(fields[0]);
    }
    if (!IsUserName(fields[1])) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "user \"", fields[1], "\": 1 to 64 of A-Z a-z 0-9 . _ - @"));
    }
    entry.user.name = std::string(fields[1]);
    if (fields.size() == 3) {
      if (fields[2] != "admin") {
        return absl::InvalidArgumentError(absl::StrCat(where, "the third field can only be \"admin\""));
      }
      entry.user.admin = true;
    }
    for (const Entry& other : table.entries_) {
      if (other.sha256_hex == entry.sha256_hex) {
        return absl::InvalidArgumentError(absl::StrCat(where, "the same token as user ", other.user.name));
      }
    }
    table.entries_.push_back(std::move(entry));
  }
  return table;
}

std::optional<TokenUser> TokenTable::Authenticate(absl::string_view token) const {
  const std::string hash = Sha256Hex(token);
  std::optional<TokenUser> found;
  for (const Entry& entry : entries_) {  // every entry, no early exit
    if (ConstantTimeEquals(hash, entry.sha256_hex)) found = entry.user;
  }
  return found;
}

MethodKind ClassifyMethod(absl::string_view method) {
  if (absl::StartsWith(method, "/grpc.health.v1.Health/")) return MethodKind::kPublic;
  if (absl::StartsWith(method, "/ringmaster.v1.JobService/") ||
      absl::StartsWith(method, "/grpc.reflection.v1alpha.ServerReflection/")) {
    return MethodKind::kUser;
  }
  if (absl::StartsWith(method, "/ringmaster.v1.NodeService/") ||
      absl::StartsWith(method, "/ringmaster.v1.RendezvousService/") ||
      absl::StartsWith(method, "/ringmaster.v1.CheckpointService/")) {
    return MethodKind::kWorker;
  }
  return MethodKind::kUnknown;
}

Authenticator::Authenticator(AuthPolicy policy, const Clock* clock) : policy_(std::move(policy)), clock_(clock) {}

absl::StatusOr<Caller> Authenticator::Authenticate(const CallCredentials& call) const {
  switch (ClassifyMethod(call.method)) {
    case MethodKind::kPublic:
      return Caller{};
    case MethodKind::kUser:
      return AuthenticateUser(call);
    case MethodKind::kWorker:
      return AuthenticateWorker(call);
    case MethodKind::kUnknown:
      break;
  }
  return absl::PermissionDeniedError(absl::StrCat("method ", call.method, " is not served to anyone"));
}

absl::StatusOr<Caller> Authenticator::AuthenticateUser(const CallCredentials& call) const {
  if (!policy_.users.has_value()) return Caller{};
  absl::string_view token = BearerToken(call.authorization);
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "no bearer token: the coordinator requires one (ringmaster --token-file FILE, RINGMASTER_TOKEN_FILE or "
        "~/.config/ringmaster/token)");
  }
  std::optional<TokenUser> user = policy_.users->Authenticate(token);
  if (!user.has_value()) return absl::UnauthenticatedError("the bearer token is not valid");
  return Caller{user->name, user->admin, false};
}

absl::StatusOr<Caller> Authenticator::AuthenticateWorker(const CallCredentials& call) const {
  if (!policy_.client_ca_pem.empty()) {
    if (call.client_cert_pem.empty()) {
      return absl::UnauthenticatedError(
          "no client certificate: workers need one issued by the cluster CA (--tls-cert, --tls-key)");
    }
    RETURN_IF_ERROR(
        VerifyPeerCertificate(call.client_cert_pem, policy_.client_ca_pem, clock_->Now(), PeerPurpose::kClient));
  }
  if (!policy_.join_token_sha256.empty()) {
    if (call.join_token.empty()) {
      return absl::UnauthenticatedError("no join token: the coordinator requires one (--join-token-file)");
    }
    if (!ConstantTimeEquals(Sha256Hex(call.join_token), policy_.join_token_sha256)) {
      return absl::UnauthenticatedError("the join token is not valid");
    }
  }
  return Caller{"", false, true};
}

absl::Status AuthorizeCancel(const Caller& caller, const std::string& owner, const std::string& job_id) {
  if (caller.admin || caller.user == owner) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("job ", job_id, " belongs to ",
                                                  owner.empty() ? std::string("nobody") : owner,
                                                  "; only its owner or an admin may cancel it"));
}

absl::Status AuthorizeNodeAdmin(const Caller& caller, absl::string_view what) {
  if (caller.admin || caller.user.empty()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("only an admin may ", what, " nodes; ", caller.user, " is not one"));
}

std::string OperatorName(const Caller& caller) { return caller.user.empty() ? "operator" : caller.user; }

absl::StatusOr<Visibility> ParseVisibility(absl::string_view text) {
  if (text == "team") return Visibility::kTeam;
  if (text == "open") return Visibility::kOpen;
  return absl::InvalidArgumentError(
      absl::StrCat("must be \"team\" (a job's owner, its queue's members and admins read it) or \"open\" "
                   "(every user reads every job), got \"",
                   text, "\""));
}

absl::Status AuthorizeRead(const Caller& caller, const JobReadScope& job, const QueueConfig& queues,
                           Visibility visibility) {
  if (visibility == Visibility::kOpen || caller.user.empty() || caller.admin || caller.user == job.owner) {
    return absl::OkStatus();
  }
  const std::string queue = job.queue.empty() ? "default" : job.queue;  // as JobLifecycle's QueueOf
  const Queue* q = queues.Find(queue);
  if (q != nullptr && q->HasMember(caller.user)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "job ", job.job_id, " belongs to queue ", queue, q == nullptr ? " (no longer configured)" : "", "; user ",
      caller.user, " is not a member (its owner, its queue's members and admins may read it)"));
}

}  // namespace ringmaster::coordinator
