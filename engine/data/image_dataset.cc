#include "engine/data/image_dataset.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/core/check.h"
#include "engine/data/idx_reader.h"
#include "engine/data/random.h"

namespace ringmaster::engine {
namespace {

Batch NewImageBatch(const Shape& sample_shape, int64_t batch_size) {
  Shape shape = {batch_size};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  Batch batch;
  batch.images = Tensor::Empty(shape, DType::kF32);
  batch.targets = Tensor::Zeros({batch_size}, DType::kI32);
  return batch;
}

void CheckSlot(const Batch& batch, int64_t slot, int64_t sample_elements) {
  ENGINE_CHECK(batch.images.defined() && slot >= 0 && slot < batch.size() &&
                   batch.images.numel() == batch.size() * sample_elements,
               "slot {} does not fit an image batch of {}", slot, batch.size());
}

// out[i] = (pixels[i] / 255 - mean) / std, in f32.
void Normalise(const uint8_t* pixels, int64_t count, float mean, float std, float* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = (static_cast<float>(pixels[i]) / 255.0f - mean) / std;
}

// `what`: "images-idx3" or "labels-idx1".
std::string FashionMnistPath(const std::string& dir, FashionMnistSplit split, const char* what) {
  return absl::StrFormat("%s/%s-%s-ubyte.gz", dir, split == FashionMnistSplit::kTrain ? "train" : "t10k", what);
}

}  // namespace

ImageDataset::ImageDataset(std::vector<uint8_t> pixels, std::vector<int32_t> labels, Shape sample_shape, float mean,
                           float std)
    : pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      sample_shape_(std::move(sample_shape)),
      sample_elements_(NumElements(sample_shape_)),
      mean_(mean),
      std_(std) {
  ENGINE_CHECK(static_cast<int64_t>(pixels_.size()) == size() * sample_elements_, "{} pixel bytes for {} images of {}",
               pixels_.size(), size(), ShapeString(sample_shape_));
  ENGINE_CHECK(std_ > 0, "std {}", std_);
}

Batch ImageDataset::NewBatch(int64_t batch_size) const { return NewImageBatch(sample_shape_, batch_size); }

void ImageDataset::Get(int64_t index, int64_t slot, Batch* batch) const {
  ENGINE_CHECK(index >= 0 && index < size(), "index {} of {}", index, size());
  CheckSlot(*batch, slot, sample_elements_);
  Normalise(pixels(index), sample_elements_, mean_, std_, batch->images.f32() + slot * sample_elements_);
  batch->targets.i32()[slot] = labels_[index];
}

absl::StatusOr<std::unique_ptr<ImageDataset>> LoadFashionMnist(const std::string& dir, FashionMnistSplit split,
                                                               const std::string& root) {
  const std::string images_path = FashionMnistPath(dir, split, "images-idx3");
  const std::string labels_path = FashionMnistPath(dir, split, "labels-idx1");
  ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path, root));
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path, root));
  if (images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dimensions [%s], expected [N, 28, 28]", images_path, absl::StrJoin(images.dims, ", ")));
  }
  if (labels.dims.size() != 1 || labels.dims[0] != images.dims[0]) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: dimensions [%s], expected [%d] to match %s", labels_path,
                                                      absl::StrJoin(labels.dims, ", "), images.dims[0], images_path));
  }
  std::vector<int32_t> label_values(labels.data.begin(), labels.data.end());
  for (size_t i = 0; i < label_values.size(); ++i) {
    if (label_values[i] >= kFashionMnistClasses) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: label %d of sample %d is outside [0, %d)", labels_path,
                                                        label_values[i], i, kFashionMnistClasses));
    }
  }
  return std::make_unique<ImageDataset>(std::move(images.data), std::move(label_values), Shape{1, 28, 28},
                                        kFashionMnistMean, kFashionMnistStd);
}

SyntheticImageDataset::SyntheticImageDataset(int64_t size, uint64_t seed, Shape sample_shape, int num_classes)
    : size_(size),
      seed_(seed),
      sample_shape_(std::move(sample_shape)),
      sample_elements_(NumElements(sample_shape_)),
      num_classes_(num_classes) {
  ENGINE_CHECK(size_ >= 0 && num_classes_ > 0, "size {}, {} classes", size_, num_classes_);
}

Batch SyntheticImageDataset::NewBatch(int64_t batch_size) const { return NewImageBatch(sample_shape_, batch_size); }

void SyntheticImageDataset::Get(int64_t index, int64_t slot, Batch* batch) const {
  ENGINE_CHECK(index >= 0 && index < size_, "index {} of {}", index, size_);
  CheckSlot(*batch, slot, sample_elements_);
  Rng rng(MixSeed(seed_, static_cast<uint64_t>(index)));
  batch->targets.i32()[slot] = static_cast<int32_t>(UniformBelow(rng, num_classes_));
  std::vector<uint8_t> pixels(sample_elements_);
  for (int64_t i = 0; i < sample_elements_; i += 8) {
    uint64_t bits = rng.Next();
    for (int64_t j = i; j < i + 8 && j < sample_elements_; ++j, bits >>= 8) pixels[j] = bits & 0xff;
  }
  Normalise(pixels.data(), sample_elements_, kFashionMnistMean, kFashionMnistStd,
            batch->images.f32() + slot * sample_elements_);
}

}  // namespace ringmaster::engine
