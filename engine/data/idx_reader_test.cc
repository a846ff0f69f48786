#include "engine/data/idx_reader.h"

#include <zlib.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

const std::string kDir = "/usr/share/datasets/fashion-mnist";

std::string TempPath(const std::string& name) { return std::string(std::getenv("TEST_TMPDIR")) + "/" + name; }

void WritePlain(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), bytes.size());
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

// An IDX header for unsigned bytes with the given dimensions.
std::string Header(std::initializer_list<uint32_t> dims) {
  std::string h = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) h += static_cast<char>((d >> shift) & 0xff);
  }
  return h;
}

TEST(IdxReaderTest, ReadsFashionMnistTrainingLabelsAndImages) {
  absl::StatusOr<IdxArray> labels = ReadIdxFile(kDir + "/train-labels-idx1-ubyte.gz");
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->dims, (std::vector<int64_t>{60000}));
  ASSERT_EQ(labels->data.size(), 60000u);
  // The first labels of the published training set: ankle boot, T-shirt, T-shirt, dress, ...
  const std::vector<uint8_t> first(labels->data.begin(), labels->data.begin() + 10);
  EXPECT_EQ(first, (std::vector<uint8_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  std::array<int, 10> per_class{};
  for (uint8_t label : labels->data) {
    ASSERT_LT(label, 10);
    ++per_class[label];
  }
  for (int count : per_class) EXPECT_EQ(count, 6000);  // the training set is balanced

  absl::StatusOr<IdxArray> images = ReadIdxFile(kDir + "/train-images-idx3-ubyte.gz");
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->dims, (std::vector<int64_t>{60000, 28, 28}));
  ASSERT_EQ(images->data.size(), 60000u * 28 * 28);
  uint8_t low = 255, high = 0;
  for (uint8_t p : images->data) low = std::min(low, p), high = std::max(high, p);
  EXPECT_EQ(low, 0);
  EXPECT_EQ(high, 255);
}

TEST(IdxReaderTest, ReadsFashionMnistTestSet) {
  absl::StatusOr<IdxArray> labels = ReadIdxFile(kDir + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->dims, (std::vector<int64_t>{10000}));
  const std::vector<uint8_t> first(labels->data.begin(), labels->data.begin() + 5);
  EXPECT_EQ(first, (std::vector<uint8_t>{9, 2, 1, 1, 6}));
  absl::StatusOr<IdxArray> images = ReadIdxFile(kDir + "/t10k-images-idx3-ubyte.gz");
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->dims, (std::vector<int64_t>{10000, 28, 28}));
}

TEST(IdxReaderTest, ReadsPlainAndGzipFilesAlike) {
  const std::string bytes = Header({2, 3}) + std::string("\x01\x02\x03\x04\x05\x06", 6);
  WritePlain(TempPath("small.idx"), bytes);
  WriteGzip(TempPath("small.idx.gz"), bytes);
  for (const std::string& path : {TempPath("small.idx"), TempPath("small.idx.gz")}) {
    absl::StatusOr<IdxArray> array = ReadIdxFile(path);
    ASSERT_TRUE(array.ok()) << array.status();
    EXPECT_EQ(array->dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(array->data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  }
}

TEST(IdxReaderTest, MissingFileIsNotFound) {
  const std::string path = TempPath("absent.idx.gz");
  absl::StatusOr<IdxArray> array = ReadIdxFile(path);
  EXPECT_EQ(array.status(), absl::NotFoundError(path + ": cannot open: No such file or directory (errno 2)"));
}

TEST(IdxReaderTest, BadMagicNamesFileAndValue) {
  const std::string path = TempPath("bad-magic.idx.gz");
  WriteGzip(path, std::string("\x12\x34\x56\x78", 4) + std::string(16, '\0'));
  EXPECT_EQ(ReadIdxFile(path).status(),
            absl::DataLossError(path + ": bad IDX magic 0x12345678 (expected 0x000008NN: two zero bytes, "
                                       "type, 1 to 8 dimensions)"));
}

TEST(IdxReaderTest, UnsupportedElementType) {
  const std::string path = TempPath("floats.idx");
  WritePlain(path, std::string("\x00\x00\x0d\x01\x00\x00\x00\x01\x00\x00\x00\x00", 12));
  EXPECT_EQ(ReadIdxFile(path).status(),
            absl::InvalidArgumentError(path + ": IDX element type 0x0d is not supported (only 0x08, unsigned byte)"));
}

TEST(IdxReaderTest, TruncatedHeader) {
  const std::string path = TempPath("short-header.idx.gz");
  WriteGzip(path, Header({60000, 28, 28}).substr(0, 10));
  EXPECT_EQ(ReadIdxFile(path).status(),
            absl::DataLossError(path + ": truncated header: 3 dimensions need 16 bytes, file has 10"));
}

TEST(IdxReaderTest, TruncatedData) {
  const std::string path = TempPath("short-data.idx.gz");
  WriteGzip(path, Header({10, 28, 28}) + std::string(1000, '\x7f'));
  EXPECT_EQ(ReadIdxFile(path).status(),
            absl::DataLossError(path + ": truncated: dimensions [10, 28, 28] need 7840 bytes of data, file has 1000"));
}

TEST(IdxReaderTest, TrailingBytes) {
  const std::string path = TempPath("long.idx");
  WritePlain(path, Header({4}) + "abcdef");
  EXPECT_EQ(ReadIdxFile(path).status(),
            absl::DataLossError(path + ": 2 unexpected bytes after the data of dimensions [4]"));
}

TEST(IdxReaderTest, TruncatedGzipStream) {
  const std::string full = TempPath("full.idx.gz");
  WriteGzip(full, Header({1000}) + std::string(1000, '\x01'));
  std::ifstream in(full, std::ios::binary);
  std::string compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string path = TempPath("cut.idx.gz");
  WritePlain(path, compressed.substr(0, compressed.size() - 6));
  EXPECT_EQ(ReadIdxFile(path).status(), absl::DataLossError(path + ": gzip error: unexpected end of file"));
}

}  // namespace
}  // namespace ringmaster::engine
