// ToGrpcStatus keeps codes one to one and cuts long messages (a message that
// echoes a huge request field would not fit in the peer's header limit and
// would fail later calls on the connection; fuzz/rendezvous_service_fuzzer
// found it).
#include "common/grpc_status.h"

#include <string>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(GrpcStatusTest, CodesMapOneToOneAndShortMessagesAreKept) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  const grpc::Status denied = ToGrpcStatus(absl::PermissionDeniedError("job_id: not yours"));
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(), "job_id: not yours");
  const std::string exactly(kMaxStatusMessageBytes, 'm');
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError(exactly)).error_message(), exactly);
}

TEST(GrpcStatusTest, ALongMessageIsCutAndSaysHowLongItWas) {
  const std::string id(8 << 20, 'j');
  const grpc::Status status = ToGrpcStatus(absl::NotFoundError("job " + id + " has no rendezvous"));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  const std::string& message = status.error_message();
  EXPECT_LT(message.size(), kMaxStatusMessageBytes + 32);
  EXPECT_EQ(message.substr(0, 8), "job jjjj");
  EXPECT_NE(message.find("... (8388630 bytes)"), std::string::npos) << message.substr(message.size() - 40);
}

TEST(GrpcStatusTest, TheCutNeverSplitsAUtf8Character) {
  // "é" is two bytes: placed so that the limit falls inside one.
  std::string text(kMaxStatusMessageBytes - 1, 'a');
  for (int i = 0; i < 10; ++i) text += "\xc3\xa9";
  const std::string cut = BoundedStatusMessage(text);
  const size_t kept = cut.find("...");
  ASSERT_NE(kept, std::string::npos);
  EXPECT_EQ(kept, kMaxStatusMessageBytes - 1);  // the 2-byte character at the limit is left out whole
}

}  // namespace
}  // namespace ringmaster
