#ifndef RINGMASTER_ENGINE_DATA_IMAGE_DATASET_H_
#define RINGMASTER_ENGINE_DATA_IMAGE_DATASET_H_

// Image classification datasets: Fashion-MNIST from Debian's
// dataset-fashion-mnist, and synthetic images for speed runs.
//
// Samples are [C, H, W] f32 images normalised as (x / 255 - mean) / std from
// 8-bit pixels x, and int32 class labels. For Fashion-MNIST mean = 0.2860 and
// std = 0.3530, the pixel mean and standard deviation of its training set
// (the values torchvision users use); the test set is normalised with the same
// constants. Both classes are immutable and thread-safe (see Dataset).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/data/dataset.h"

namespace ringmaster::engine {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;
inline constexpr int kFashionMnistClasses = 10;

enum class FashionMnistSplit { kTrain, kTest };  // 60000 / 10000 images

// Images held in memory as 8-bit pixels, normalised as they are copied out.
class ImageDataset : public Dataset {
 public:
  // `pixels`: labels.size() images of NumElements(sample_shape) bytes each.
  // Mismatched sizes or std <= 0 are bugs (CHECK); loaders validate first.
  ImageDataset(std::vector<uint8_t> pixels, std::vector<int32_t> labels, Shape sample_shape, float mean, float std);

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Batch NewBatch(int64_t batch_size) const override;
  void Get(int64_t index, int64_t slot, Batch* batch) const override;

  const Shape& sample_shape() const { return sample_shape_; }
  int32_t label(int64_t index) const { return labels_[index]; }
  // Raw pixels of one sample.
  const uint8_t* pixels(int64_t index) const { return pixels_.data() + index * sample_elements_; }

 private:
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
  Shape sample_shape_;
  int64_t sample_elements_;
  float mean_;
  float std_;
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from `dir` (usually
// kFashionMnistDir), beneath the data root `root` when one is given
// (engine/data/data_file.h). Errors name the file: NOT_FOUND if missing,
// PERMISSION_DENIED if reached through a link out of the root, DATA_LOSS if
// corrupt, INVALID_ARGUMENT if image and label files disagree (counts, shapes,
// labels outside [0, 10)).
absl::StatusOr<std::unique_ptr<ImageDataset>> LoadFashionMnist(const std::string& dir, FashionMnistSplit split,
                                                               const std::string& root = "");

// `size` random images and labels, generated on demand from (seed, index):
// uniform 8-bit pixels normalised with the Fashion-MNIST constants, labels
// uniform in [0, num_classes). Uses no memory per sample.
class SyntheticImageDataset : public Dataset {
 public:
  SyntheticImageDataset(int64_t size, uint64_t seed, Shape sample_shape = {1, 28, 28},
                        int num_classes = kFashionMnistClasses);

  int64_t size() const override { return size_; }
  Batch NewBatch(int64_t batch_size) const override;
  void Get(int64_t index, int64_t slot, Batch* batch) const override;

 private:
  int64_t size_;
  uint64_t seed_;
  Shape sample_shape_;
  int64_t sample_elements_;
  int num_classes_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_IMAGE_DATASET_H_
