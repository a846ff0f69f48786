#ifndef RINGMASTER_COORDINATOR_GRPC_STATUS_H_
#define RINGMASTER_COORDINATOR_GRPC_STATUS_H_

// absl::Status <-> grpc::Status: the codes map one to one (both follow
// google.rpc.Code), the message is kept; and the reply of a unary callback
// handler that finishes inline. Header-only; thread-safe.

#include <string>

#include "absl/status/status.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace ringmaster::coordinator {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  return grpc::Status(code >= 1 && code <= 16 ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::UNKNOWN,
                      std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// Finishes a unary callback handler at once with `status`.
inline grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_GRPC_STATUS_H_
