#include "engine/data/text_dataset.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), bytes.size());
  return path;
}

// The input and target rows of sample `index`.
std::pair<std::vector<int32_t>, std::vector<int32_t>> Sample(const Dataset& data, int64_t index) {
  Batch batch = data.NewBatch(1);
  data.Get(index, 0, &batch);
  EXPECT_EQ(batch.tokens.dtype(), DType::kI32);
  EXPECT_EQ(batch.tokens.shape(), batch.targets.shape());
  return {std::vector<int32_t>(batch.tokens.i32(), batch.tokens.i32() + batch.tokens.numel()),
          std::vector<int32_t>(batch.targets.i32(), batch.targets.i32() + batch.targets.numel())};
}

std::vector<int32_t> Bytes(const std::string& text, int64_t begin, int64_t count) {
  std::vector<int32_t> out;
  for (int64_t i = begin; i < begin + count; ++i) out.push_back(static_cast<unsigned char>(text[i]));
  return out;
}

TEST(ByteTextDatasetTest, WindowsAreShiftedByOneAndHeldOutIsTheEnd) {
  std::string text = "In the beginning God created the heaven and the earth.\n";
  text += std::string("\xff\x80\x00\x7f", 4);  // tokens are unsigned bytes
  const std::string path = WriteTemp("genesis.txt", text);
  ByteTextOptions options;
  options.context = 8;
  options.held_out_fraction = 0.25;
  absl::StatusOr<ByteTextSplits> splits = LoadByteText(path, options);
  ASSERT_TRUE(splits.ok()) << splits.status();
  const int64_t total = static_cast<int64_t>(text.size());
  const int64_t held_out = total / 4;  // floor(total * 0.25)
  const int64_t train = total - held_out;
  ASSERT_EQ(splits->train->size(), train - options.context);
  ASSERT_EQ(splits->held_out->size(), held_out - options.context);
  for (int64_t i = 0; i < splits->train->size(); ++i) {
    auto [inputs, targets] = Sample(*splits->train, i);
    EXPECT_EQ(inputs, Bytes(text, i, 8)) << i;
    EXPECT_EQ(targets, Bytes(text, i + 1, 8)) << i;
  }
  // The last training window's target ends just before the held-out part.
  EXPECT_EQ(splits->train->WindowStart(splits->train->size() - 1) + options.context, train - 1);
  for (int64_t i = 0; i < splits->held_out->size(); ++i) {
    auto [inputs, targets] = Sample(*splits->held_out, i);
    EXPECT_EQ(inputs, Bytes(text, train + i, 8)) << i;
    EXPECT_EQ(targets, Bytes(text, train + i + 1, 8)) << i;
  }
  auto [inputs, targets] = Sample(*splits->held_out, splits->held_out->size() - 1);
  EXPECT_EQ(targets.back(), 0x7f);
  EXPECT_EQ(targets[targets.size() - 3], 0x80);
}

TEST(ByteTextDatasetTest, StrideSpacesTheWindows) {
  auto text = std::make_shared<const std::string>("abcdefghijklmnopqrstuvwxyz");
  absl::StatusOr<std::unique_ptr<ByteTextDataset>> data = ByteTextDataset::Create(text, 0, 26, 5, 5);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ((*data)->size(), 5);  // windows of 6 bytes at 0, 5, 10, 15, 20
  auto [inputs, targets] = Sample(**data, 4);
  EXPECT_EQ(inputs, Bytes(*text, 20, 5));
  EXPECT_EQ(targets, Bytes(*text, 21, 5));
}

TEST(ByteTextDatasetTest, ReadsAnyFileSuchAsTheInstalledBibleData) {
  const std::string path = "/usr/lib/bible.data";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path << " (Debian package bible-kjv-text) is missing";
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ByteTextOptions options;
  options.context = 64;
  absl::StatusOr<ByteTextSplits> splits = LoadByteText(path, options);
  ASSERT_TRUE(splits.ok()) << splits.status();
  const int64_t train = static_cast<int64_t>(text.size()) - static_cast<int64_t>(text.size() * 0.1);
  EXPECT_EQ(splits->train->size(), train - 64);
  auto [inputs, targets] = Sample(*splits->held_out, 1000);
  EXPECT_EQ(inputs, Bytes(text, train + 1000, 64));
  EXPECT_EQ(targets, Bytes(text, train + 1001, 64));
}

TEST(ByteTextDatasetTest, TooSmallASplitIsAnError) {
  const std::string path = WriteTemp("short.txt", "0123456789");
  ByteTextOptions options;
  options.context = 4;
  options.held_out_fraction = 0.3;  // 3 held-out bytes < one window of 5
  EXPECT_EQ(LoadByteText(path, options).status(),
            absl::InvalidArgumentError(path + ": held-out split: 3 bytes are fewer than one window of context 4 + 1"));
  options.held_out_fraction = 1.5;
  EXPECT_EQ(LoadByteText(path, options).status(),
            absl::InvalidArgumentError(path + ": held-out fraction 1.5 is outside (0, 1)"));
}

TEST(ByteTextDatasetTest, MissingFileNamesIt) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/absent.txt";
  EXPECT_EQ(LoadByteText(path, ByteTextOptions()).status(),
            absl::NotFoundError("open " + path + ": No such file or directory (errno 2)"));
}

TEST(SyntheticTokenDatasetTest, TokensAreShiftedInRangeAndReproducible) {
  SyntheticTokenDataset data(1000, 42, 16, 50257), same(1000, 42, 16, 50257), other(1000, 43, 16, 50257);
  auto [inputs, targets] = Sample(data, 123);
  for (int t = 0; t + 1 < 16; ++t) EXPECT_EQ(targets[t], inputs[t + 1]);
  for (int32_t token : inputs) ASSERT_TRUE(token >= 0 && token < 50257) << token;
  EXPECT_EQ(Sample(same, 123), Sample(data, 123));
  EXPECT_NE(Sample(other, 123), Sample(data, 123));
  EXPECT_NE(Sample(data, 124), Sample(data, 123));
}

}  // namespace
}  // namespace ringmaster::engine
