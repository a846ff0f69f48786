#include "engine/checkpoint/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

std::string TempPath(const std::string& name) { return std::string(std::getenv("TEST_TMPDIR")) + "/" + name; }

TEST(FileIoTest, Sha256MatchesTheStandardVectors) {
  // FIPS 180-2 examples.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 incremental;
  incremental.Update("a", 1);
  incremental.Update("bc", 2);
  EXPECT_EQ(incremental.HexDigest(), Sha256Hex("abc"));
}

TEST(FileIoTest, DurableWriteRoundTripsAndDigestsWhatItWrote) {
  const std::string path = TempPath("data.bin");
  std::string contents(300000, '\0');
  for (size_t i = 0; i < contents.size(); ++i) contents[i] = static_cast<char>(i * 7);
  DurableFileWriter writer;
  ASSERT_TRUE(writer.Open(path).ok());
  ASSERT_TRUE(writer.Append(contents.substr(0, 1000)).ok());
  ASSERT_TRUE(writer.Append(contents.substr(1000)).ok());
  absl::StatusOr<FileDigest> digest = writer.Finish();
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(digest->size, 300000);
  EXPECT_EQ(digest->sha256, Sha256Hex(contents));
  absl::StatusOr<std::string> read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, contents);
  // Rewriting truncates.
  ASSERT_TRUE(WriteFileDurably(path, "short").ok());
  EXPECT_EQ(*ReadFile(path), "short");
  EXPECT_TRUE(FsyncDirectory(std::getenv("TEST_TMPDIR")).ok());
}

TEST(FileIoTest, ErrorsNameThePathAndErrno) {
  const std::string missing = TempPath("no/such/dir/file");
  EXPECT_EQ(WriteFileDurably(missing, "x").status(),
            absl::NotFoundError("open " + missing + ": No such file or directory (errno 2)"));
  EXPECT_EQ(ReadFile(missing).status(),
            absl::NotFoundError("open " + missing + ": No such file or directory (errno 2)"));
  EXPECT_EQ(FsyncDirectory(missing), absl::NotFoundError("open " + missing + ": No such file or directory (errno 2)"));
}

// The *At forms never go through a link: a planted one is PERMISSION_DENIED
// and what it points at is neither created, written nor read.
TEST(FileIoTest, AtFormsRefuseALink) {
  const std::string dir = TempPath("at-forms");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteFileDurably(TempPath("at-target"), "secret").ok());
  std::filesystem::create_symlink(TempPath("at-target"), dir + "/link");
  std::filesystem::create_symlink(TempPath("at-new-target"), dir + "/dangling");
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  absl::StatusOr<FileDigest> written = WriteFileDurablyAt(fd, dir, "plain", "x");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*ReadFileAt(fd, dir, "plain"), "x");
  EXPECT_EQ(ReadFileAt(fd, dir, "link").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(WriteFileDurablyAt(fd, dir, "dangling", "x").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(std::filesystem::exists(TempPath("at-new-target")));
  // A new file only: an existing one is not overwritten.
  EXPECT_EQ(WriteFileDurablyAt(fd, dir, "plain", "y").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(*ReadFile(TempPath("at-target")), "secret");
  ::close(fd);
}

TEST(FileIoTest, FullDiskIsResourceExhausted) {
  // /dev/full accepts the open and fails every write with ENOSPC.
  EXPECT_EQ(WriteFileDurably("/dev/full", std::string(100, 'x')).status(),
            absl::ResourceExhaustedError("write /dev/full: No space left on device (errno 28)"));
}

}  // namespace
}  // namespace ringmaster::engine
