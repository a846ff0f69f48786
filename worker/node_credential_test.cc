// NodeCredential: kept 0600 in the state directory, read back by a restarted
// worker, refused when others may read it or it is not a credential; sent as
// the node credential header once there is one.
#include "worker/node_credential.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using testing::ReadFile;
using testing::TempDir;

TEST(NodeCredentialTest, KeptOwnerOnlyAndReadBack) {
  TempDir dir;
  const std::string path = dir.Join("node-credential");
  NodeCredential credential(path);
  ASSERT_TRUE(credential.Load().ok()) << "none yet";
  EXPECT_EQ(credential.Get(), "");
  EXPECT_TRUE(credential.CallHeaders().empty());

  const std::string issued(64, 'b');
  ASSERT_TRUE(credential.Set(issued).ok());
  EXPECT_EQ(ReadFile(path), issued + "\n");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(credential.CallHeaders().size(), 1u);
  EXPECT_EQ(credential.CallHeaders()[0], std::make_pair(std::string(kNodeCredentialHeader), issued));

  NodeCredential restarted(path);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_EQ(restarted.Get(), issued);
}

TEST(NodeCredentialTest, RefusesAFileOthersMayReadOrThatIsNoCredential) {
  TempDir dir;
  const std::string path = dir.Join("node-credential");
  std::ofstream(path) << std::string(64, 'c') << "\n";
  chmod(path.c_str(), 0644);
  absl::Status s = NodeCredential(path).Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;

  std::ofstream(path) << "not a credential\n";
  chmod(path.c_str(), 0600);
  s = NodeCredential(path).Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("not a node credential"), std::string::npos) << s;
}

TEST(NodeCredentialTest, AReplacedCredentialIsWhatIsSent) {
  TempDir dir;
  NodeCredential credential(dir.Join("node-credential"));
  ASSERT_TRUE(credential.Set(std::string(64, '1')).ok());
  ASSERT_TRUE(credential.Set(std::string(64, '2')).ok());
  EXPECT_EQ(credential.CallHeaders()[0].second, std::string(64, '2'));
  EXPECT_EQ(ReadFile(dir.Join("node-credential")), std::string(64, '2') + "\n");
}

}  // namespace
}  // namespace ringmaster::worker
