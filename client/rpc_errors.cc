#include "client/rpc_errors.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli.h"
#include "common/grpc_security.h"

namespace ringmaster::client {
namespace {

// "INVALID_ARGUMENT": gRPC's and absl's codes are the same numbers.
std::string CodeName(grpc::StatusCode code) { return absl::StatusCodeToString(static_cast<absl::StatusCode>(code)); }

}  // namespace

std::string ConnectionFailureReason(const std::string& grpc_message) {
  const std::string m = absl::AsciiStrToLower(grpc_message);
  if (absl::StrContains(m, "connection refused")) return "connection refused";
  if (absl::StrContains(m, "no such file or directory")) return "no such socket";
  if (absl::StrContains(m, "dns resolution failed") || absl::StrContains(m, "name or service not known") ||
      absl::StrContains(m, "could not resolve")) {
    return "cannot resolve the address";
  }
  if (absl::StrContains(m, "timed out") || absl::StrContains(m, "timeout")) return "connection timed out";
  if (absl::StrContains(m, "connection reset") || absl::StrContains(m, "socket closed") ||
      absl::StrContains(m, "broken pipe") || absl::StrContains(m, "connection aborted") ||
      absl::StrContains(m, "goaway") || absl::StrContains(m, "endpoint closing")) {
    return "connection lost";
  }
  if (absl::StrContains(m, "failed to connect") || absl::StrContains(m, "no route to host") ||
      absl::StrContains(m, "network is unreachable") || absl::StrContains(m, "connections to all backends failing")) {
    return "cannot connect";
  }
  return "";
}

std::string DescribeRpcError(const grpc::Status& status, const RpcContext& context) {
  const std::string& message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE: {
      if (IsTlsHandshakeFailure(message)) {
        // Not a server being away: this client does not trust the server
        // (or one side does not speak TLS). Retrying cannot help.
        return absl::StrCat("TLS handshake with the coordinator at ", context.coordinator,
                            " failed: its certificate is not issued by --tls-ca, does not name that address, or "
                            "one side does not use TLS (UNAUTHENTICATED)");
      }
      std::string reason = ConnectionFailureReason(message);
      if (reason.empty()) {
        return absl::StrCat("the coordinator at ", context.coordinator, " is unavailable: ", message,
                            " (try again)");
      }
      std::string line = absl::StrCat("cannot reach the coordinator at ", context.coordinator, " (", reason, ")");
      if (reason == "connection refused" || reason == "no such socket") absl::StrAppend(&line, "; start one with `ringmaster local up`");
      return line;
    }
    case grpc::StatusCode::NOT_FOUND:
      if (!context.job_id.empty()) return absl::StrCat("job ", context.job_id, " not found (NOT_FOUND)");
      return absl::StrCat(message, " (NOT_FOUND)");
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ALREADY_EXISTS:
      return absl::StrCat(message, " (", CodeName(status.error_code()), ")");
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      if (context.timeout == absl::InfiniteDuration()) {
        return absl::StrCat("the coordinator at ", context.coordinator, " did not answer ", context.rpc);
      }
      return absl::StrCat("the coordinator at ", context.coordinator, " did not answer ", context.rpc, " within ",
                          absl::FormatDuration(context.timeout));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::StrCat("the coordinator at ", context.coordinator, " does not implement ", context.rpc);
    default:
      return absl::StrCat(context.rpc, ": ", message, " (", CodeName(status.error_code()), ")");
  }
}

void SetTimeout(grpc::ClientContext* context, absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return;
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

int ReportRpcError(const grpc::Status& status, const RpcContext& context, std::ostream& err) {
  err << "ringmaster: " << DescribeRpcError(status, context) << "\n";
  return kExitError;
}

}  // namespace ringmaster::client
