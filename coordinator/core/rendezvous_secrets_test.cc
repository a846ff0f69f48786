#include "coordinator/core/rendezvous_secrets.h"

#include <sys/stat.h>

#include <fstream>

#include "common/clock.h"
#include "coordinator/core/rendezvous.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::NewTempDir;

TEST(RendezvousSecretsTest, OnePerGenerationAndStableAcrossRestarts) {
  const std::string path = NewTempDir("secrets") + "/rendezvous.key";
  absl::StatusOr<std::unique_ptr<RendezvousSecrets>> first = RendezvousSecrets::LoadOrCreate(path);
  ASSERT_TRUE(first.ok()) << first.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string s1 = (*first)->For("j-1", 1);
  EXPECT_EQ(s1.size(), 64u);
  EXPECT_NE(s1, (*first)->For("j-1", 2));
  EXPECT_NE(s1, (*first)->For("j-2", 1));
  // "j-1" generation 12 and "j-11" generation 2 do not collide.
  EXPECT_NE((*first)->For("j-1", 12), (*first)->For("j-11", 2));

  absl::StatusOr<std::unique_ptr<RendezvousSecrets>> again = RendezvousSecrets::LoadOrCreate(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->For("j-1", 1), s1);

  absl::StatusOr<std::unique_ptr<RendezvousSecrets>> other =
      RendezvousSecrets::LoadOrCreate(NewTempDir("secrets2") + "/rendezvous.key");
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->For("j-1", 1), s1) << "a fresh key gives other secrets";
}

TEST(RendezvousSecretsTest, RefusesKeyFileOthersCanRead) {
  const std::string path = NewTempDir("secrets-open") + "/rendezvous.key";
  std::ofstream(path) << std::string(64, 'a') << "\n";
  chmod(path.c_str(), 0644);
  EXPECT_EQ(RendezvousSecrets::LoadOrCreate(path).status().code(), absl::StatusCode::kPermissionDenied);
  chmod(path.c_str(), 0600);
  EXPECT_TRUE(RendezvousSecrets::LoadOrCreate(path).ok());
  std::ofstream(path, std::ios::trunc) << "not-hex\n";
  EXPECT_EQ(RendezvousSecrets::LoadOrCreate(path).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousSecretsTest, CheckIsPermissionDenied) {
  RendezvousSecrets secrets("key");
  EXPECT_TRUE(secrets.Check("j-1", 3, secrets.For("j-1", 3)).ok());
  EXPECT_EQ(secrets.Check("j-1", 3, "").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(secrets.Check("j-1", 3, secrets.For("j-1", 2)).code(), absl::StatusCode::kPermissionDenied);
}

TEST(RendezvousSecretsTest, RendezvousChecksTheScopeSecret) {
  FakeClock clock;
  Rendezvous rendezvous(&clock);
  EXPECT_EQ(rendezvous.Secret("j-1", 1), "");
  EXPECT_TRUE(rendezvous.CheckSecret({"j-1", 1, 0, ""}).ok()) << "no secrets configured";
  RendezvousSecrets secrets("key");
  rendezvous.SetSecrets(&secrets);
  const std::string secret = rendezvous.Secret("j-1", 1);
  EXPECT_EQ(secret, secrets.For("j-1", 1));
  EXPECT_TRUE(rendezvous.CheckSecret({"j-1", 1, 0, secret}).ok());
  EXPECT_EQ(rendezvous.CheckSecret({"j-1", 1, 0, ""}).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(rendezvous.CheckSecret({"j-1", 2, 0, secret}).code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace ringmaster::coordinator
