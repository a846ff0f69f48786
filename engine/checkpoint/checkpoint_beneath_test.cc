// Checkpoints beneath an operator's root (issue #27): no symbolic link below
// the root is followed for a write, a read, a listing or a removal, and a
// resume checks the files against the SHA-256s the coordinator recorded at
// commit, not only against the manifest beside them.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/beneath.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/file_io.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

namespace fs = std::filesystem;

CheckpointContents Contents(int seed) {
  Tensor w = Tensor::Empty({4, 3}, DType::kF32);
  auto* bytes = static_cast<unsigned char*>(w.raw());
  for (size_t i = 0; i < w.bytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 31 + seed);
  CheckpointContents c;
  c.model = {{"w", w}};
  c.optimizer = {{"w.exp_avg", w}};
  c.state = {{"step", std::to_string(seed)}};
  return c;
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every case with openat2 and with the walk of kernels without it.
class CheckpointBeneathTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    previous_ = internal::SetUseOpenat2(GetParam());
    base_ = (fs::path(std::getenv("TEST_TMPDIR")) /
             (std::string(GetParam() ? "openat2-" : "walk-") +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .lexically_normal()
                .string();
    fs::remove_all(base_);
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    fs::create_directories(root_);
    fs::create_directories(outside_);
    Write(outside_ + "/keep", "victim's");
  }
  void TearDown() override {
    internal::SetUseOpenat2(previous_);
    fs::remove_all(base_);
  }
  std::string Dir(const std::string& job = "j-1") const { return root_ + "/" + job + "/gen-1"; }
  // The files of a written checkpoint as a coordinator records them at commit.
  static std::vector<ManifestEntry> Recorded(const std::string& path) {
    absl::StatusOr<Manifest> manifest = VerifyCheckpoint(path);
    EXPECT_TRUE(manifest.ok()) << manifest.status();
    return manifest.ok() ? manifest->files : std::vector<ManifestEntry>{};
  }

  bool previous_ = true;
  std::string base_, root_, outside_;
};

TEST_P(CheckpointBeneathTest, WritesAndReadsBeneathTheRoot) {
  absl::StatusOr<std::string> path = WriteCheckpoint(Dir(), 5, Contents(5), 2, root_);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, Dir() + "/step-000000005");
  absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(*path, root_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 5);
  EXPECT_TRUE(VerifyCheckpoint(*path, root_).ok());
  EXPECT_EQ(LoadNewestCheckpoint(Dir(), root_)->step, 5);
  ASSERT_TRUE(RemoveCheckpoint(*path, root_).ok());
  EXPECT_FALSE(fs::exists(*path));
  ASSERT_TRUE(RemoveEmptyDirectory(Dir(), root_).ok());
  EXPECT_FALSE(fs::exists(Dir()));
  EXPECT_TRUE(fs::exists(root_ + "/j-1"));
}

TEST_P(CheckpointBeneathTest, ADirectoryOutsideTheRootIsRefused) {
  absl::Status s = WriteCheckpoint(outside_ + "/j-1/gen-1", 1, Contents(1), 2, root_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), outside_ + "/j-1/gen-1 is not beneath " + root_);
  EXPECT_EQ(WriteCheckpoint(root_ + "/j-1/../../outside", 1, Contents(1), 2, root_).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(fs::exists(outside_ + "/j-1"));
}

// A job plants a link where another job's (or its own next generation's)
// directory will be: the write is refused and nothing lands where it points.
TEST_P(CheckpointBeneathTest, APlantedDirectoryLinkIsNeverWrittenThrough) {
  fs::create_directory_symlink(outside_, root_ + "/j-1");
  absl::Status s = WriteCheckpoint(Dir(), 1, Contents(1), 2, root_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), Dir() + ": " + root_ + "/j-1 is a symbolic link; links are not followed beneath " + root_);
  EXPECT_EQ(std::distance(fs::directory_iterator(outside_), fs::directory_iterator()), 1);  // just "keep"

  fs::create_directories(root_ + "/j-2");
  fs::create_directory_symlink(outside_, root_ + "/j-2/gen-1");
  EXPECT_EQ(WriteCheckpoint(Dir("j-2"), 1, Contents(1), 2, root_).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ListCheckpoints(Dir("j-2"), root_).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(std::distance(fs::directory_iterator(outside_), fs::directory_iterator()), 1);
}

// A link named like a step: not listed, not loaded, and replaced (the link,
// not what it points at) when that step is written.
TEST_P(CheckpointBeneathTest, ALinkNamedLikeAStepIsNoCheckpoint) {
  ASSERT_TRUE(WriteCheckpoint(Dir(), 1, Contents(1), 0, root_).ok());
  ASSERT_TRUE(WriteCheckpoint(base_ + "/other", 9, Contents(9), 0).ok());
  fs::create_directory_symlink(base_ + "/other/step-000000009", Dir() + "/step-000000009");
  absl::StatusOr<std::vector<CheckpointInfo>> listed = ListCheckpoints(Dir(), root_);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].step, 1);
  EXPECT_EQ(LoadNewestCheckpoint(Dir(), root_)->step, 1);
  absl::Status s = LoadCheckpoint(Dir() + "/step-000000009", root_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(s.message(), "step-000000009 is a symbolic link")) << s;

  ASSERT_TRUE(WriteCheckpoint(Dir(), 9, Contents(2), 0, root_).ok());
  EXPECT_FALSE(fs::is_symlink(Dir() + "/step-000000009"));
  EXPECT_EQ(LoadCheckpoint(base_ + "/other/step-000000009")->contents.state.at("step"), "9");  // untouched
}

TEST_P(CheckpointBeneathTest, ALinkedFileInACheckpointIsNotRead) {
  absl::StatusOr<std::string> path = WriteCheckpoint(Dir(), 1, Contents(1), 0, root_);
  ASSERT_TRUE(path.ok());
  fs::rename(*path + "/state.json", outside_ + "/state.json");
  fs::create_symlink(outside_ + "/state.json", *path + "/state.json");
  absl::Status s = LoadCheckpoint(*path, root_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), *path + "/state.json: " + *path + "/state.json is a symbolic link; links are not followed "
                         "beneath " + *path);
}

// Retention and pruning remove a link planted in an old checkpoint, never
// what it points at.
TEST_P(CheckpointBeneathTest, RemovalNeverFollowsALink) {
  absl::StatusOr<std::string> old = WriteCheckpoint(Dir(), 1, Contents(1), 1, root_);
  ASSERT_TRUE(old.ok());
  fs::create_directory_symlink(outside_, *old + "/escape");
  ASSERT_TRUE(WriteCheckpoint(Dir(), 2, Contents(2), 1, root_).ok());  // keep 1: step 1 goes
  EXPECT_FALSE(fs::exists(*old));
  EXPECT_EQ(Read(outside_ + "/keep"), "victim's");

  absl::StatusOr<std::string> pruned = WriteCheckpoint(Dir("j-3"), 1, Contents(1), 0, root_);
  ASSERT_TRUE(pruned.ok());
  fs::create_directory_symlink(outside_, *pruned + "/escape");
  ASSERT_TRUE(RemoveCheckpoint(*pruned, root_).ok());
  EXPECT_FALSE(fs::exists(*pruned));
  EXPECT_EQ(Read(outside_ + "/keep"), "victim's");
  // A generation directory replaced by a link is not removed through it.
  fs::remove_all(Dir("j-3"));
  fs::create_directory_symlink(outside_, Dir("j-3"));
  EXPECT_EQ(RemoveCheckpoint(Dir("j-3") + "/keep", root_).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(RemoveEmptyDirectory(Dir("j-3"), root_).ok());
  EXPECT_EQ(Read(outside_ + "/keep"), "victim's");
}

TEST_P(CheckpointBeneathTest, AResumeChecksTheCoordinatorsRecordNotOnlyTheManifest) {
  absl::StatusOr<std::string> path = WriteCheckpoint(Dir(), 3, Contents(3), 0, root_);
  ASSERT_TRUE(path.ok());
  const std::vector<ManifestEntry> recorded = Recorded(*path);
  ASSERT_EQ(recorded.size(), 3u);
  EXPECT_TRUE(LoadCheckpoint(*path, root_, &recorded).ok());

  // Altered after the commit, and the manifest rewritten to match: the
  // manifest alone is satisfied, the coordinator's record is not.
  const std::string model = *path + "/model.safetensors";
  std::string bytes = Read(model);
  bytes[bytes.size() - 1] ^= 0x40;
  Write(model, bytes);
  Manifest manifest = *ParseManifest(Read(*path + "/MANIFEST.json"), "MANIFEST.json");
  for (ManifestEntry& e : manifest.files) {
    if (e.name == "model.safetensors") e.sha256 = Sha256Hex(bytes);
  }
  Write(*path + "/MANIFEST.json", SerializeManifest(manifest));
  EXPECT_TRUE(LoadCheckpoint(*path, root_).ok());
  absl::Status s = LoadCheckpoint(*path, root_, &recorded).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StartsWith(s.message(), model + ": ")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "but the coordinator recorded")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "(the file was changed after it was committed)")) << s;

  // The manifest and the record must name the same files.
  std::vector<ManifestEntry> fewer(recorded.begin(), recorded.end() - 1);
  s = LoadCheckpoint(*path, root_, &fewer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(s.message(), "not among the files the coordinator recorded at commit")) << s;
  std::vector<ManifestEntry> more = recorded;
  more.push_back({"extra.bin", 1, std::string(64, '0')});
  s = LoadCheckpoint(*path, root_, &more).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), *path + "/extra.bin: the coordinator recorded it at commit, but the manifest does not list it");
}

INSTANTIATE_TEST_SUITE_P(Openat2AndWalk, CheckpointBeneathTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "openat2" : "walk"; });

}  // namespace
}  // namespace ringmaster::engine
