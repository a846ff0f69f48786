#ifndef RINGMASTER_WORKER_GRPC_STATUS_H_
#define RINGMASTER_WORKER_GRPC_STATUS_H_

// grpc::Status <-> absl::Status (the codes are the same numbers). Adapters only.

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace ringmaster::worker {

inline absl::Status ToAbslStatus(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_GRPC_STATUS_H_
