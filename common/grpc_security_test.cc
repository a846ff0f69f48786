#include "common/grpc_security.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(GrpcSecurityTest, LocalListenAddresses) {
  EXPECT_TRUE(IsLocalListenAddress("127.0.0.1:50051"));
  EXPECT_TRUE(IsLocalListenAddress("127.1.2.3:0"));
  EXPECT_TRUE(IsLocalListenAddress("localhost:50051"));
  EXPECT_TRUE(IsLocalListenAddress("[::1]:50051"));
  EXPECT_TRUE(IsLocalListenAddress("unix:/tmp/rm.sock"));
  EXPECT_FALSE(IsLocalListenAddress("0.0.0.0:50051"));
  EXPECT_FALSE(IsLocalListenAddress(":50051"));
  EXPECT_FALSE(IsLocalListenAddress("[::]:50051"));
  EXPECT_FALSE(IsLocalListenAddress("10.0.0.5:50051"));
  EXPECT_FALSE(IsLocalListenAddress("coordinator.example:50051"));
  EXPECT_FALSE(IsLocalListenAddress("50051"));
}

TEST(GrpcSecurityTest, RecognisesHandshakeFailures) {
  EXPECT_TRUE(IsTlsHandshakeFailure(
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Ssl handshake failed: "
      "SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed"));
  EXPECT_FALSE(IsTlsHandshakeFailure(
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: "
      "Connection refused"));
}

}  // namespace
}  // namespace ringmaster
