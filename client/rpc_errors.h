#ifndef RINGMASTER_CLIENT_RPC_ERRORS_H_
#define RINGMASTER_CLIENT_RPC_ERRORS_H_

// The one line a command prints on stderr when a call to the coordinator
// fails, chosen so the user knows what to do:
//
//   UNAVAILABLE (nothing listening, unresolvable, connection lost):
//     ringmaster: cannot reach the coordinator at 127.0.0.1:50051 (connection
//     refused); start one with `ringmaster local up`
//   NOT_FOUND with a job id:   ringmaster: job j-42 not found (NOT_FOUND)
//   INVALID_ARGUMENT, FAILED_PRECONDITION, ALREADY_EXISTS: the server's
//     message, which names the field or the state, and the code:
//     ringmaster: <message> (INVALID_ARGUMENT)
//   DEADLINE_EXCEEDED: ringmaster: the coordinator at ADDR did not answer
//     <Rpc> within 30s
//   UNIMPLEMENTED: ringmaster: the coordinator at ADDR does not implement <Rpc>
//   UNAVAILABLE because the TLS handshake failed: ringmaster: TLS handshake
//     with the coordinator at ADDR failed: ... (UNAUTHENTICATED)
//   UNAUTHENTICATED, PERMISSION_DENIED: ringmaster: <Rpc>: <message> (<CODE>)
//   others: ringmaster: <Rpc>: <message> (<CODE>)

#include <ostream>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace ringmaster::client {

struct RpcContext {
  absl::string_view coordinator;  // the address the CLI dialled
  absl::string_view rpc;          // "ListJobs"
  absl::string_view job_id;       // the job asked about; empty if none
  absl::Duration timeout = absl::InfiniteDuration();  // the call's deadline
};

// The message (without "ringmaster: " and newline) for a failed call.
std::string DescribeRpcError(const grpc::Status& status, const RpcContext& context);

// Why a connection-level UNAVAILABLE happened, in a few words ("connection
// refused", "no such socket", "cannot resolve the host name"); empty when the
// message is not about the connection (the server said UNAVAILABLE itself).
std::string ConnectionFailureReason(const std::string& grpc_message);

// Sets the call's deadline `timeout` from now (none when infinite).
void SetTimeout(grpc::ClientContext* context, absl::Duration timeout);

// Writes "ringmaster: <DescribeRpcError>\n" to `err`; returns kExitError.
int ReportRpcError(const grpc::Status& status, const RpcContext& context, std::ostream& err);

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_RPC_ERRORS_H_
