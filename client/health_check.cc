#include "client/health_check.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "client/rpc_errors.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

// HealthCheckResponse { ServingStatus status = 1; } -> status; false if the
// bytes are not such a message.
bool ParseResponse(const grpc::ByteBuffer& buffer, ServingStatus* serving) {
  std::vector<grpc::Slice> slices;
  if (buffer.Valid() && !buffer.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  *serving = ServingStatus::kUnknown;
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    if (tag == (1 << 3 | 0)) {  // field 1, varint
      uint32_t value = 0;
      if (!in.ReadVarint32(&value)) return false;
      *serving = static_cast<ServingStatus>(value);
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return true;
}

}  // namespace

grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout, bool wait_for_ready,
                         ServingStatus* serving) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_wait_for_ready(wait_for_ready);
  SetTimeout(&context, timeout);
  grpc::Slice empty("");  // HealthCheckRequest{service: ""} is zero bytes.
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status result;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status status) {
                   std::lock_guard<std::mutex> lock(mu);
                   result = std::move(status);
                   done = true;
                   cv.notify_all();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!result.ok()) return result;
  if (!ParseResponse(response, serving)) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "malformed grpc.health.v1.HealthCheckResponse");
  }
  return grpc::Status::OK;
}

}  // namespace ringmaster::client
