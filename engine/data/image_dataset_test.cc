#include "engine/data/image_dataset.h"

#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

std::string TempDir(const std::string& name) {
  std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

std::string Header(std::initializer_list<uint32_t> dims) {
  std::string h = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) h += static_cast<char>((d >> shift) & 0xff);
  }
  return h;
}

std::vector<int32_t> Ints(const Tensor& t) { return std::vector<int32_t>(t.i32(), t.i32() + t.numel()); }

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

TEST(ImageDatasetTest, FashionMnistTrainingSetIsNormalisedToZeroMeanUnitVariance) {
  absl::StatusOr<std::unique_ptr<ImageDataset>> train = LoadFashionMnist(kFashionMnistDir, FashionMnistSplit::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  const ImageDataset& data = **train;
  ASSERT_EQ(data.size(), 60000);
  constexpr int64_t kBatch = 1000;
  Batch batch = data.NewBatch(kBatch);
  ASSERT_EQ(batch.images.shape(), (Shape{kBatch, 1, 28, 28}));
  ASSERT_EQ(batch.targets.shape(), (Shape{kBatch}));
  ASSERT_EQ(batch.targets.dtype(), DType::kI32);
  double sum = 0, sum_squares = 0;
  for (int64_t first = 0; first < data.size(); first += kBatch) {
    for (int64_t slot = 0; slot < kBatch; ++slot) data.Get(first + slot, slot, &batch);
    const float* x = batch.images.f32();
    for (int64_t i = 0; i < batch.images.numel(); ++i) sum += x[i], sum_squares += double{x[i]} * x[i];
  }
  const double n = 60000.0 * 784;
  const double mean = sum / n;
  // The documented constants are the training set's pixel mean and std.
  EXPECT_NEAR(mean, 0.0, 2e-3);
  EXPECT_NEAR(std::sqrt(sum_squares / n - mean * mean), 1.0, 2e-3);
}

TEST(ImageDatasetTest, GetCopiesPixelsAndLabelOfTheIndex) {
  absl::StatusOr<std::unique_ptr<ImageDataset>> test = LoadFashionMnist(kFashionMnistDir, FashionMnistSplit::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  const ImageDataset& data = **test;
  ASSERT_EQ(data.size(), 10000);
  Batch batch = data.NewBatch(2);
  data.Get(9999, 1, &batch);
  data.Get(0, 0, &batch);
  EXPECT_EQ(Ints(batch.targets), (std::vector<int32_t>{data.label(0), data.label(9999)}));
  EXPECT_EQ(data.label(0), 9);
  for (int64_t slot : {0, 1}) {
    const uint8_t* pixels = data.pixels(slot == 0 ? 0 : 9999);
    for (int i = 0; i < 784; ++i) {
      const float expected = (pixels[i] / 255.0f - kFashionMnistMean) / kFashionMnistStd;
      ASSERT_FLOAT_EQ(batch.images.f32()[slot * 784 + i], expected) << "slot " << slot << " pixel " << i;
    }
  }
}

TEST(ImageDatasetTest, MissingDirectoryNamesTheFile) {
  const std::string dir = TempDir("empty");
  absl::StatusOr<std::unique_ptr<ImageDataset>> data = LoadFashionMnist(dir, FashionMnistSplit::kTest);
  EXPECT_EQ(data.status(), absl::NotFoundError(dir + "/t10k-images-idx3-ubyte.gz: cannot open: No such file or "
                                                     "directory (errno 2)"));
}

TEST(ImageDatasetTest, LabelCountMustMatchImages) {
  const std::string dir = TempDir("mismatch");
  WriteGzip(dir + "/train-images-idx3-ubyte.gz", Header({3, 28, 28}) + std::string(3 * 784, '\0'));
  WriteGzip(dir + "/train-labels-idx1-ubyte.gz", Header({2}) + std::string(2, '\1'));
  EXPECT_EQ(LoadFashionMnist(dir, FashionMnistSplit::kTrain).status(),
            absl::InvalidArgumentError(dir + "/train-labels-idx1-ubyte.gz: dimensions [2], expected [3] to match " +
                                       dir + "/train-images-idx3-ubyte.gz"));
}

TEST(ImageDatasetTest, LabelsOutsideTheClassesAreRejected) {
  const std::string dir = TempDir("bad-label");
  WriteGzip(dir + "/t10k-images-idx3-ubyte.gz", Header({2, 28, 28}) + std::string(2 * 784, '\0'));
  WriteGzip(dir + "/t10k-labels-idx1-ubyte.gz", Header({2}) + std::string("\x01\x0a", 2));
  EXPECT_EQ(LoadFashionMnist(dir, FashionMnistSplit::kTest).status(),
            absl::InvalidArgumentError(dir + "/t10k-labels-idx1-ubyte.gz: label 10 of sample 1 is outside [0, 10)"));
}

TEST(ImageDatasetTest, SyntheticImagesAreAFunctionOfSeedAndIndex) {
  SyntheticImageDataset a(100, 7), same(100, 7), other(100, 8);
  Batch x = a.NewBatch(3), y = same.NewBatch(3), z = other.NewBatch(3);
  for (int64_t slot = 0; slot < 3; ++slot) {
    a.Get(slot * 10, slot, &x);
    same.Get(slot * 10, slot, &y);
    other.Get(slot * 10, slot, &z);
  }
  EXPECT_EQ(x.images.ToVector(), y.images.ToVector());
  EXPECT_EQ(Ints(x.targets), Ints(y.targets));
  EXPECT_NE(x.images.ToVector(), z.images.ToVector());
  const std::vector<float> pixels = x.images.ToVector();
  EXPECT_NE(std::vector<float>(pixels.begin(), pixels.begin() + 784),
            std::vector<float>(pixels.begin() + 784, pixels.begin() + 2 * 784));
  const float lowest = (0 - kFashionMnistMean) / kFashionMnistStd;
  const float highest = (1 - kFashionMnistMean) / kFashionMnistStd;
  for (float p : pixels) ASSERT_TRUE(p >= lowest && p <= highest) << p;
  for (int32_t label : Ints(x.targets)) ASSERT_TRUE(label >= 0 && label < 10) << label;
}

TEST(ImageDatasetTest, MicroBatchesPartitionTheBatch) {
  SyntheticImageDataset data(8, 1);
  Batch batch = data.NewBatch(6);
  for (int64_t slot = 0; slot < 6; ++slot) data.Get(slot, slot, &batch);
  const std::vector<float> all = batch.images.ToVector();
  for (int micro = 0; micro < 3; ++micro) {
    Batch part = MicroBatch(batch, 3, micro);
    ASSERT_EQ(part.images.shape(), (Shape{2, 1, 28, 28}));
    EXPECT_EQ(part.images.ToVector(),
              std::vector<float>(all.begin() + micro * 2 * 784, all.begin() + (micro + 1) * 2 * 784));
    const std::vector<int32_t> labels = Ints(batch.targets);
    EXPECT_EQ(Ints(part.targets), std::vector<int32_t>(labels.begin() + 2 * micro, labels.begin() + 2 * micro + 2));
  }
}

}  // namespace
}  // namespace ringmaster::engine
