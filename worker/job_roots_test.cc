#include "worker/job_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using testing::TempDir;
using testing::WriteFile;

class JobRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(data_ + "/fmnist");
    std::filesystem::create_directories(dir_.Join("state"));
    WriteFile(data_ + "/fmnist/train-images-idx3-ubyte.gz", "x");
    WriteFile(dir_.Join("state/join-token"), "secret");
  }

  TempDir dir_;
  const std::string data_ = dir_.Join("data");
};

TEST_F(JobRootsTest, DataLiesBeneathARootAsNamed) {
  EXPECT_EQ(*DataRootFor("", {data_}), "");
  EXPECT_EQ(*DataRootFor(data_ + "/fmnist", {"/usr/share/datasets", data_}), data_);
  EXPECT_EQ(*DataRootFor(data_ + "/fmnist/train-images-idx3-ubyte.gz", {data_ + "/"}), data_);
  EXPECT_EQ(*DataRootFor(data_ + "/not-yet", {data_}), data_) << "a missing path is the trainer's to report";
  absl::Status outside = DataRootFor(dir_.Join("state"), {data_}).status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(outside.message(), "data.path: " + dir_.Join("state") + " is outside this node's data roots (" + data_ +
                                   "); put the dataset under one of them, or ask the operator to add a root "
                                   "(ringmaster-worker --data-roots)");
  EXPECT_EQ(DataRootFor(data_ + "/../state", {data_}).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(DataRootFor(data_ + "/x", {}).status().message().find("(none configured)") != std::string::npos, true);
}

// A data.path that is, or goes through, a link out of its root is refused
// before any rank starts: the worker's join token stays the worker's.
TEST_F(JobRootsTest, ALinkOutOfTheDataRootIsRefused) {
  ASSERT_EQ(symlink(dir_.Join("state").c_str(), (data_ + "/state").c_str()), 0);
  absl::Status refused = DataRootFor(data_ + "/state", {data_}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message().rfind("data.path: " + data_ + "/state: ", 0), 0u) << refused;
  EXPECT_EQ(DataRootFor(data_ + "/state/join-token", {data_}).status().code(), absl::StatusCode::kPermissionDenied);
}

// The operator's root may itself be a link, and a path may name its target.
TEST_F(JobRootsTest, ARootThatIsALinkHoldsItsTarget) {
  ASSERT_EQ(symlink(data_.c_str(), dir_.Join("datasets").c_str()), 0);
  EXPECT_EQ(*DataRootFor(dir_.Join("datasets/fmnist"), {dir_.Join("datasets")}), dir_.Join("datasets"));
  const std::string canonical = std::filesystem::canonical(data_).string();
  EXPECT_EQ(*DataRootFor(canonical + "/fmnist", {dir_.Join("datasets")}), canonical);
}

TEST_F(JobRootsTest, AFifoForDataDoesNotHoldUpTheWorker) {
  ASSERT_EQ(mkfifo((data_ + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(*DataRootFor(data_ + "/fifo", {data_}), data_);
}

TEST_F(JobRootsTest, ACheckpointDirectoryLiesBeneathTheCoordinatorsRootsWithNoLink) {
  const std::string root = dir_.Join("ckpt");
  EXPECT_TRUE(CheckCheckpointDir("", {root}).ok());
  EXPECT_TRUE(CheckCheckpointDir(root + "/j-1/gen-1", {root}).ok()) << "no root yet: nothing beneath it";
  std::filesystem::create_directories(root + "/team/j-1");
  EXPECT_TRUE(CheckCheckpointDir(root + "/team/j-1/gen-1", {"/elsewhere", root}).ok());
  absl::Status outside = CheckCheckpointDir(dir_.Join("state/j-1/gen-1"), {root});
  EXPECT_EQ(outside.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(outside.message(), "checkpoint_dir: " + dir_.Join("state/j-1/gen-1") +
                                   " is not beneath a checkpoint root the coordinator named (" + root + ")");
  EXPECT_EQ(CheckCheckpointDir(root + "/j-1/gen-1", {}).code(), absl::StatusCode::kPermissionDenied);

  // A link planted under the root, where a job's directory or the spec's
  // directory goes.
  ASSERT_EQ(symlink(dir_.Join("state").c_str(), (root + "/link").c_str()), 0);
  absl::Status refused = CheckCheckpointDir(root + "/link/j-2/gen-1", {root});
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(), "checkpoint_dir: " + root + "/link/j-2/gen-1: " + root +
                                   "/link is a symbolic link; links are not followed beneath " + root);
  ASSERT_EQ(symlink(dir_.Join("state").c_str(), (root + "/team/j-1/gen-2").c_str()), 0);
  EXPECT_EQ(CheckCheckpointDir(root + "/team/j-1/gen-2", {root}).code(), absl::StatusCode::kPermissionDenied);

  EXPECT_TRUE(OpenCheckpointDirectory(root + "/team", {root}).ok());
  EXPECT_EQ(OpenCheckpointDirectory(root + "/link", {root}).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(OpenCheckpointDirectory(dir_.Join("state"), {root}).status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace ringmaster::worker
