// The coordinator's plaintext gRPC health listener (CoordinatorConfig::
// health_listen), what Kubernetes' gRPC probes call: it answers
// grpc.health.v1.Health/Check SERVING while the coordinator serves, offers no
// other service, and a busy port is an error that names it.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

class HealthListenTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    CoordinatorFixture::SetUp();
    StopServer();
    config_.health_listen = "127.0.0.1:0";
    StartServer();
  }
};

constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
// A bidi stream; one empty request and a half-close get one answer and OK.
constexpr char kReflection[] = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// `method` with an empty request (Health/Check: service "") on
// 127.0.0.1:port, without TLS: the status, and the response's bytes
// ({status: SERVING} is 08 01).
grpc::Status Call(int port, const std::string& method, std::string* bytes) {
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1), response;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<grpc::Status> status;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = s;
                   cv.notify_all();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return status.has_value(); });
  std::vector<grpc::Slice> slices;
  if (status->ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) bytes->append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return *status;
}

TEST_F(HealthListenTest, ServesHealthAloneWithoutTls) {
  ASSERT_GT(server_->health_port(), 0);
  EXPECT_NE(server_->health_port(), server_->port());
  std::string bytes;
  grpc::Status s = Call(server_->health_port(), kHealthCheck, &bytes);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));

  // Reflection is on the main port only (where the call can succeed)...
  s = Call(server_->port(), kReflection, &bytes);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Call(server_->health_port(), kReflection, &bytes).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  // ... and so is the job service.
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->health_port()),
                                     grpc::InsecureChannelCredentials());
  v1::ListJobsRequest request;
  v1::ListJobsResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(v1::JobService::NewStub(channel)->ListJobs(&context, request, &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  const int port = server_->health_port();
  StopServer();
  bytes.clear();
  EXPECT_EQ(Call(port, kHealthCheck, &bytes).error_code(), grpc::StatusCode::UNAVAILABLE)
      << "still serving after Shutdown";
}

TEST_F(HealthListenTest, BusyPortIsUnavailableAndNamedAndNoneByDefault) {
  CoordinatorConfig other = config_;
  other.state_dir = NewTempDir("other");
  other.metrics_listen = "";
  other.health_listen = absl::StrCat("127.0.0.1:", server_->health_port());
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> second = CoordinatorServer::Start(other, &clock_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(other.health_listen), absl::string_view::npos) << second.status();

  other.health_listen = "";
  second = CoordinatorServer::Start(other, &clock_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->health_port(), 0);
  (*second)->Shutdown();
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
