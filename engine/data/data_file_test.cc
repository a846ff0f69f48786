// Data files beneath the worker's data root (issue #27): a symbolic link in a
// data directory that leads out of the root is not followed, by any reader.
#include "engine/data/data_file.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "engine/data/idx_reader.h"
#include "engine/data/image_dataset.h"
#include "engine/data/text_dataset.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A plain (uncompressed) IDX file of `n` unsigned bytes in one dimension.
std::string Idx(int n) {
  std::string bytes = {0, 0, 0x08, 1, 0, 0, 0, static_cast<char>(n)};
  bytes.append(static_cast<size_t>(n), '\x07');
  return bytes;
}

class DataFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::path(std::getenv("TEST_TMPDIR")).lexically_normal().string() + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(base_);
    root_ = base_ + "/data";
    outside_ = base_ + "/worker-state";
    fs::create_directories(root_ + "/ds");
    fs::create_directories(outside_);
    Write(outside_ + "/join-token", std::string(2000, 's'));
    Write(root_ + "/ds/corpus.txt", std::string(2000, 'a'));
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string base_, root_, outside_;
};

TEST_F(DataFileTest, OpensBeneathTheRootAndRefusesALinkOutOfIt) {
  EXPECT_TRUE(OpenDataFile(root_ + "/ds/corpus.txt", root_).ok());
  fs::create_symlink(outside_ + "/join-token", root_ + "/ds/token.txt");
  absl::StatusOr<UniqueFd> fd = OpenDataFile(root_ + "/ds/token.txt", root_);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StartsWith(fd.status().message(), root_ + "/ds/token.txt: ")) << fd.status();
  // A directory link on the way, too.
  fs::create_directory_symlink(outside_, root_ + "/ds/state");
  EXPECT_EQ(OpenDataFile(root_ + "/ds/state/join-token", root_).status().code(), absl::StatusCode::kPermissionDenied);
  // A path that is not beneath the root at all.
  fd = OpenDataFile(outside_ + "/join-token", root_);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(fd.status().message(), outside_ + "/join-token is not beneath the data root " + root_);
  EXPECT_EQ(OpenDataFile(root_ + "/../worker-state/join-token", root_).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Without a root (a rank started by hand), the path is opened as given.
  EXPECT_TRUE(OpenDataFile(root_ + "/ds/token.txt", "").ok());
  EXPECT_EQ(OpenDataFile(root_ + "/ds/missing", root_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DataFileTest, TheTextReaderRefusesALinkOutOfTheRoot) {
  ByteTextOptions options;
  options.context = 8;
  EXPECT_TRUE(LoadByteText(root_ + "/ds/corpus.txt", options, root_).ok());
  fs::create_symlink(outside_ + "/join-token", root_ + "/ds/linked.txt");
  absl::StatusOr<ByteTextSplits> splits = LoadByteText(root_ + "/ds/linked.txt", options, root_);
  EXPECT_EQ(splits.status().code(), absl::StatusCode::kPermissionDenied) << splits.status();
}

TEST_F(DataFileTest, TheImageReaderRefusesALinkedFileInTheDataDirectory) {
  Write(root_ + "/ds/plain-idx", Idx(5));
  absl::StatusOr<IdxArray> idx = ReadIdxFile(root_ + "/ds/plain-idx", root_);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(idx->dims, std::vector<int64_t>{5});
  Write(outside_ + "/train-images-idx3-ubyte.gz", Idx(5));
  fs::create_symlink(outside_ + "/train-images-idx3-ubyte.gz", root_ + "/ds/train-images-idx3-ubyte.gz");
  EXPECT_EQ(ReadIdxFile(root_ + "/ds/train-images-idx3-ubyte.gz", root_).status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<std::unique_ptr<ImageDataset>> loaded =
      LoadFashionMnist(root_ + "/ds", FashionMnistSplit::kTrain, root_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "train-images-idx3-ubyte.gz")) << loaded.status();
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), "symbolic link")) << loaded.status();
}

}  // namespace
}  // namespace ringmaster::engine
