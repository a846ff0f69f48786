#include "engine/checkpoint/file_io.h"

#include <cstdlib>
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

TEST(FileIoTest, FullDiskIsResourceExhausted) {
  // /dev/full accepts the open and fails every write with ENOSPC.
  EXPECT_EQ(WriteFileDurably("/dev/full", std::string(100, 'x')).status(),
            absl::ResourceExhaustedError("write /dev/full: No space left on device (errno 28)"));
}

}  // namespace
}  // namespace ringmaster::engine
