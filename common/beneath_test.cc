#include "common/beneath.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

TEST(RelativeBeneathTest, ByComponentsAfterNormalisation) {
  EXPECT_EQ(*RelativeBeneath("/r/a/./b", "/r"), "a/b");
  EXPECT_EQ(*RelativeBeneath("/r//a/", "/r/"), "a");
  EXPECT_EQ(*RelativeBeneath("/r", "/r"), "");
  EXPECT_EQ(*RelativeBeneath("/r/a/../b", "/r"), "b");
  EXPECT_EQ(RelativeBeneath("/r/../etc", "/r").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(RelativeBeneath("/r2/x", "/r").status().message(), "/r2/x is not beneath /r");
  EXPECT_EQ(RelativeBeneath("r/x", "/r").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RelativeBeneath("/r/x", "r").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RelativeBeneathTest, RootOfTakesTheDeepestRootThatHoldsThePath) {
  const std::vector<std::string> roots = {"/ckpt", "/ckpt/shared/", "/other"};
  EXPECT_EQ(RootOf("/ckpt/shared/alice/j-1", roots), "/ckpt/shared");
  EXPECT_EQ(RootOf("/ckpt/j-1", roots), "/ckpt");
  EXPECT_EQ(RootOf("/ckpt/../etc", roots), std::nullopt);
  EXPECT_EQ(RootOf("/ckpt2/x", roots), std::nullopt);
}

// Every case runs twice: with openat2 (where the kernel has it) and with the
// component-by-component walk of kernels without it.
class BeneathTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    previous_ = internal::SetUseOpenat2(GetParam());
    base_ = (fs::path(::testing::TempDir()) / (std::string("beneath-") + (GetParam() ? "openat2" : "walk") + "-" +
                                                ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .lexically_normal()
                .string();
    fs::remove_all(base_);
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    fs::create_directories(root_ + "/ds");
    fs::create_directories(outside_);
    Write(root_ + "/ds/file", "inside");
    Write(outside_ + "/secret", "secret");
  }
  void TearDown() override {
    internal::SetUseOpenat2(previous_);
    fs::remove_all(base_);
  }
  static void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
  static std::string Read(int fd) {
    char buffer[64];
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, 0);
    return n < 0 ? "" : std::string(buffer, static_cast<size_t>(n));
  }
  BeneathRoot Root(Symlinks symlinks = Symlinks::kRefuse) {
    absl::StatusOr<BeneathRoot> root = BeneathRoot::Open(root_, symlinks);
    EXPECT_TRUE(root.ok()) << root.status();
    return *std::move(root);
  }

  bool previous_ = true;
  std::string base_, root_, outside_;
};

TEST_P(BeneathTest, OpensAFileBeneathTheRoot) {
  absl::StatusOr<UniqueFd> fd = Root().Open("ds/file", O_RDONLY);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(Read(fd->get()), "inside");
  EXPECT_TRUE(Root().Open("", O_RDONLY | O_DIRECTORY).ok());
  EXPECT_EQ(Root().Open("ds/missing", O_RDONLY).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(BeneathTest, ALinkedDirectoryOnTheWayIsRefusedNamingIt) {
  fs::create_directory_symlink(outside_, root_ + "/ds/link");
  absl::StatusOr<UniqueFd> fd = Root().Open("ds/link/secret", O_RDONLY);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(fd.status().message(), root_ + "/ds/link/secret: " + root_ +
                                       "/ds/link is a symbolic link; links are not followed beneath " + root_);
}

TEST_P(BeneathTest, ALinkedFileIsRefused) {
  fs::create_symlink(outside_ + "/secret", root_ + "/ds/secret");
  absl::StatusOr<UniqueFd> fd = Root().Open("ds/secret", O_RDONLY);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(fd.status().message().find(root_ + "/ds/secret is a symbolic link"), std::string::npos) << fd.status();
  // Data sets: a link out of the root is refused as well, naming it.
  fd = Root(Symlinks::kWithinRoot).Open("ds/secret", O_RDONLY);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied) << fd.status();
  if (GetParam()) {
    EXPECT_EQ(fd.status().message(), root_ + "/ds/secret: leads out of " + root_ + " through a symbolic link (" +
                                         root_ + "/ds/secret is one); links are followed only where they stay "
                                         "beneath it");
  }
}

TEST_P(BeneathTest, DataSetLinksThatStayBeneathTheRootAreFollowedOnlyWithOpenat2) {
  fs::create_symlink("file", root_ + "/ds/alias");               // relative, stays inside
  fs::create_symlink(root_ + "/ds/file", root_ + "/ds/absolute");  // absolute: never
  absl::StatusOr<UniqueFd> fd = Root(Symlinks::kWithinRoot).Open("ds/alias", O_RDONLY);
  if (GetParam()) {
    ASSERT_TRUE(fd.ok()) << fd.status();
    EXPECT_EQ(Read(fd->get()), "inside");
  } else {
    EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied);
  }
  EXPECT_EQ(Root(Symlinks::kWithinRoot).Open("ds/absolute", O_RDONLY).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Root(Symlinks::kRefuse).Open("ds/alias", O_RDONLY).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_P(BeneathTest, DotDotIsNeverAccepted) {
  absl::StatusOr<UniqueFd> fd = Root().Open("ds/../../outside/secret", O_RDONLY);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Root().Open("ds/../ds/file", O_RDONLY).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Root().Open("/etc/passwd", O_RDONLY).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(BeneathTest, CreatingAFileThroughAPlantedLinkIsRefusedAndCreatesNothing) {
  fs::create_symlink(outside_ + "/planted", root_ + "/ds/new");
  absl::StatusOr<UniqueFd> fd = Root().Open("ds/new", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied) << fd.status();
  EXPECT_FALSE(fs::exists(outside_ + "/planted"));
}

TEST_P(BeneathTest, MakeDirectoriesCreatesWhatIsMissingAndRefusesALink) {
  absl::StatusOr<UniqueFd> made = Root().MakeDirectories("ckpt/j-1/gen-2", 0755);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(fs::is_directory(root_ + "/ckpt/j-1/gen-2"));
  EXPECT_TRUE(Root().MakeDirectories("ckpt/j-1/gen-2", 0755).ok());  // again: nothing to do

  fs::create_directory_symlink(outside_, root_ + "/ckpt/j-2");
  made = Root().MakeDirectories("ckpt/j-2/gen-1", 0755);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(made.status().message(), root_ + "/ckpt/j-2/gen-1: " + root_ +
                                         "/ckpt/j-2 is a symbolic link; links are not followed beneath " + root_);
  EXPECT_FALSE(fs::exists(outside_ + "/gen-1"));
}

TEST_P(BeneathTest, TheRootItselfMayBeALink) {
  fs::create_directory_symlink(root_, base_ + "/alias");
  absl::StatusOr<BeneathRoot> root = BeneathRoot::Open(base_ + "/alias", Symlinks::kRefuse);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE(root->Open("ds/file", O_RDONLY).ok());
  EXPECT_EQ(BeneathRoot::Open(base_ + "/none", Symlinks::kRefuse).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(BeneathRoot::Open(base_ + "/made/here", Symlinks::kRefuse, /*create=*/true).ok());
}

TEST_P(BeneathTest, OpenEntryRefusesALink) {
  fs::create_symlink(outside_ + "/secret", root_ + "/ds/secret");
  absl::StatusOr<UniqueFd> dir = Root().Open("ds", O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dir.ok());
  EXPECT_TRUE(OpenEntry(dir->get(), root_ + "/ds", "file", O_RDONLY).ok());
  EXPECT_EQ(OpenEntry(dir->get(), root_ + "/ds", "secret", O_RDONLY).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(OpenEntry(dir->get(), root_ + "/ds", "../x", O_RDONLY).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(BeneathTest, RemoveTreeRemovesLinksNotWhatTheyPointAt) {
  fs::create_directories(root_ + "/tree/a/b");
  Write(root_ + "/tree/a/b/f", "x");
  fs::create_directory_symlink(outside_, root_ + "/tree/a/out");
  fs::create_symlink(outside_ + "/secret", root_ + "/tree/secret");
  absl::StatusOr<UniqueFd> dir = Root().Open("", O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(RemoveTreeAt(dir->get(), root_, "tree").ok());
  EXPECT_FALSE(fs::exists(root_ + "/tree"));
  EXPECT_TRUE(fs::exists(outside_ + "/secret"));
  EXPECT_TRUE(RemoveTreeAt(dir->get(), root_, "tree").ok());  // missing: OK
}

TEST_P(BeneathTest, ListDirectoryDoesNotCountALinkAsADirectory) {
  fs::create_directory_symlink(outside_, root_ + "/ds/link");
  fs::create_directory(root_ + "/ds/sub");
  absl::StatusOr<UniqueFd> dir = Root().Open("ds", O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::vector<DirectoryEntry>> entries = ListDirectory(dir->get(), root_ + "/ds");
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].name, "file");
  EXPECT_FALSE((*entries)[0].is_directory);
  EXPECT_EQ((*entries)[1].name, "link");
  EXPECT_FALSE((*entries)[1].is_directory);
  EXPECT_EQ((*entries)[2].name, "sub");
  EXPECT_TRUE((*entries)[2].is_directory);
}

INSTANTIATE_TEST_SUITE_P(Openat2AndWalk, BeneathTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "openat2" : "walk"; });

}  // namespace
}  // namespace ringmaster
