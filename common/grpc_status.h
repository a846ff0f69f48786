#ifndef RINGMASTER_COMMON_GRPC_STATUS_H_
#define RINGMASTER_COMMON_GRPC_STATUS_H_

// absl::Status <-> grpc::Status, the one copy: both follow google.rpc.Code, so
// the codes map one to one (a code outside 1..16 becomes UNKNOWN); the
// message is kept, up to kMaxStatusMessageBytes. And the reply of a unary
// callback handler that finishes inline. Header-only; thread-safe.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace ringmaster {

// A status message travels in a header (grpc-message, percent-encoded): one
// that echoes a huge request field ("job <8 MiB id> has no rendezvous")
// would pass the peer's metadata limit (8 KiB), fail that call and every
// later call on the connection ("received initial metadata size exceeds
// limit"; found by fuzz/rendezvous_service_fuzzer). Longer messages are cut
// here, at a UTF-8 character boundary, saying how long they were.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

inline std::string BoundedStatusMessage(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  size_t cut = kMaxStatusMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(message.substr(0, cut), "... (", message.size(), " bytes)");
}

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  return grpc::Status(code >= 1 && code <= 16 ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::UNKNOWN,
                      BoundedStatusMessage(status.message()));
}

// `context`, when given, prefixes the message: "<context>: <message>".
inline absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context = "") {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  const auto absl_code = code >= 1 && code <= 16 ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown;
  return absl::Status(absl_code, context.empty() ? status.error_message()
                                                 : absl::StrCat(context, ": ", status.error_message()));
}

// Finishes a unary callback handler at once with `status`.
inline grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_GRPC_STATUS_H_
