#ifndef RINGMASTER_ENGINE_DIST_TCP_STORE_WIRE_H_
#define RINGMASTER_ENGINE_DIST_TCP_STORE_WIRE_H_

// The TcpStore wire protocol and the socket calls both ends use.
//
// Every message is a frame: a 4-byte little-endian body length, then the body.
//   request body:  u8 op | u32 key count | (u32 length, bytes) per key |
//                  u32 length, value bytes | i64 delta | i64 timeout in ms
//   response body: u8 absl::StatusCode | u32 length, payload bytes
// The response payload is the value (get), the new counter in decimal (add),
// empty (set, wait) or the error message. Integers are little-endian. A client
// sends one request at a time per connection and reads its response.
//
// Socket helpers return UNAVAILABLE when the peer is gone (EOF, reset, refused)
// and DEADLINE_EXCEEDED when the deadline passes first. Stateless; thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringmaster::engine::dist::tcp_store_wire {

enum class Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kWait = 4 };

// Larger frames are refused (a corrupt length must not allocate gigabytes).
constexpr uint32_t kMaxFrameBytes = 1u << 30;

struct Request {
  Op op = Op::kSet;
  std::vector<std::string> keys;
  std::string value;
  int64_t delta = 0;
  int64_t timeout_ms = 0;
};

struct Response {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string payload;
};

// Whole frames (length prefix included).
std::string EncodeRequest(const Request& request);
std::string EncodeResponse(const Response& response);
// From a frame's body.
absl::StatusOr<Request> DecodeRequest(absl::string_view body);
absl::StatusOr<Response> DecodeResponse(absl::string_view body);

// If `buffer` starts with a whole frame, moves its body to `body`, erases the
// frame from `buffer` and returns true. INVALID_ARGUMENT for an oversized frame.
absl::StatusOr<bool> TakeFrame(std::string* buffer, std::string* body);

// A listening TCP socket on host:port (port 0: an ephemeral port), with the
// bound port in *bound_port. Close-on-exec, non-blocking.
absl::StatusOr<int> Listen(const std::string& host, int port, int* bound_port);
// A connected TCP socket to host:port (one attempt, bounded by `deadline`).
absl::StatusOr<int> Connect(const std::string& host, int port, absl::Time deadline);
// Writes all of `data` to a (possibly non-blocking) socket before `deadline`.
absl::Status SendAll(int fd, absl::string_view data, absl::Time deadline);
// Reads one frame's body before `deadline`.
absl::StatusOr<std::string> ReadFrame(int fd, absl::Time deadline);

}  // namespace ringmaster::engine::dist::tcp_store_wire

#endif  // RINGMASTER_ENGINE_DIST_TCP_STORE_WIRE_H_
