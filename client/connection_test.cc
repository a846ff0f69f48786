#include "client/connection.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace ringmaster::client {
namespace {

std::string TempDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& text, mode_t mode) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), mode);
}

TEST(ConnectionTest, DefaultTokenPathFollowsXdg) {
  EXPECT_EQ(DefaultTokenPath("/home/a", ""), "/home/a/.config/ringmaster/token");
  EXPECT_EQ(DefaultTokenPath("/home/a", "/cfg"), "/cfg/ringmaster/token");
}

TEST(ConnectionTest, DefaultTokenFileIsOptionalAnExplicitOneIsNot) {
  ConnectionOptions options;
  options.home = TempDir("home-empty");
  absl::StatusOr<std::string> none = LoadToken(options);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, "");

  options.token_file = options.home + "/missing";
  EXPECT_EQ(LoadToken(options).status().code(), absl::StatusCode::kNotFound);

  options.token_file = "";
  options.home = TempDir("home-token");
  Write(options.home + "/.config/ringmaster/token", "tok-0123456789abcdef\n", 0600);
  absl::StatusOr<std::string> token = LoadToken(options);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "tok-0123456789abcdef");

  chmod((options.home + "/.config/ringmaster/token").c_str(), 0644);
  EXPECT_EQ(LoadToken(options).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST(ConnectionTest, RemoteCoordinatorNeedsTls) {
  ConnectionOptions options;
  options.home = TempDir("home-remote");
  for (const char* local : {"127.0.0.1:50051", "localhost:1", "unix:/tmp/x.sock", "ipv4:127.0.0.1:5", "[::1]:9"}) {
    options.coordinator = local;
    EXPECT_TRUE(ConnectToCoordinator(options).ok()) << local;
  }
  for (const char* remote : {"10.1.2.3:50051", "coordinator.example:50051", "dns:///coordinator:50051"}) {
    options.coordinator = remote;
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = ConnectToCoordinator(options);
    EXPECT_EQ(channel.status().code(), absl::StatusCode::kInvalidArgument) << remote;
  }
  options.tls_ca = "/nonexistent/ca.crt";
  EXPECT_EQ(ConnectToCoordinator(options).status().code(), absl::StatusCode::kNotFound);
}

// A malformed address is named as such, not mistaken for a remote one that
// needs TLS.
TEST(ConnectionTest, AnAddressWithoutAPortOrWithAUrlSchemeIsNamed) {
  ConnectionOptions options;
  options.home = TempDir("home-address");
  options.coordinator = "127.0.0.1";
  EXPECT_EQ(ConnectToCoordinator(options).status().message(),
            "--coordinator 127.0.0.1: expected host:port, e.g. 127.0.0.1:50051 (no port given)");
  options.coordinator = "http://127.0.0.1:50777";
  EXPECT_EQ(ConnectToCoordinator(options).status().message(),
            "--coordinator http://127.0.0.1:50777: a gRPC address is host:port, not a URL (--coordinator "
            "127.0.0.1:50777)");
  for (const char* bad : {"localhost:", "[::1]", "host:port"}) {
    EXPECT_EQ(CheckCoordinatorAddress(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  for (const char* good : {"[::1]:9", "unix:/x.sock", "dns:///c:1", "c.example:50051"}) {
    EXPECT_TRUE(CheckCoordinatorAddress(good).ok()) << good;
  }
}

}  // namespace
}  // namespace ringmaster::client
