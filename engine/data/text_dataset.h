#ifndef RINGMASTER_ENGINE_DATA_TEXT_DATASET_H_
#define RINGMASTER_ENGINE_DATA_TEXT_DATASET_H_

// Language-model datasets of token windows: byte-level text from any file
// (tokens are bytes, vocabulary 256) and random tokens for speed runs.
//
// Sample i is a window of context + 1 tokens w[0..T]; the batch gets inputs
// w[0..T-1] in `tokens` and targets w[1..T] in `targets` (each target is the
// token after its input). Immutable and thread-safe (see Dataset).

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/data/dataset.h"

namespace ringmaster::engine {

inline constexpr int kByteVocabSize = 256;

// Windows over bytes [begin, begin + length) of a shared text: sample i starts
// at begin + i * stride, so size() = (length - context - 1) / stride + 1.
// stride 1 makes every position a sample; stride = context gives windows that
// overlap only in the one token their input/target shift needs.
class ByteTextDataset : public Dataset {
 public:
  // INVALID_ARGUMENT if context < 1, stride < 1, the range is outside the
  // text, or it holds fewer than context + 1 bytes.
  static absl::StatusOr<std::unique_ptr<ByteTextDataset>> Create(std::shared_ptr<const std::string> text, int64_t begin,
                                                                 int64_t length, int64_t context, int64_t stride = 1);

  int64_t size() const override { return size_; }
  Batch NewBatch(int64_t batch_size) const override;
  void Get(int64_t index, int64_t slot, Batch* batch) const override;

  int64_t context() const { return context_; }
  // Offset of sample `index`'s first byte in the text.
  int64_t WindowStart(int64_t index) const { return begin_ + index * stride_; }

 private:
  ByteTextDataset(std::shared_ptr<const std::string> text, int64_t begin, int64_t length, int64_t context,
                  int64_t stride);

  std::shared_ptr<const std::string> text_;
  int64_t begin_;
  int64_t context_;
  int64_t stride_;
  int64_t size_;
};

struct ByteTextOptions {
  int64_t context = 256;  // T: tokens per sample
  // The last floor(file size * fraction) bytes are held out; in (0, 1).
  double held_out_fraction = 0.1;
  int64_t stride = 1;
};

struct ByteTextSplits {
  std::unique_ptr<ByteTextDataset> train;     // the first part of the file
  std::unique_ptr<ByteTextDataset> held_out;  // the last part
};

// Reads the file at `path` (any bytes), beneath the data root `root` when
// one is given (engine/data/data_file.h), and splits it. Errors name the file:
// NOT_FOUND / PERMISSION_DENIED etc. from opening it (PERMISSION_DENIED also
// for a link out of the root), INVALID_ARGUMENT if a split has fewer than
// context + 1 bytes or the options are out of range.
absl::StatusOr<ByteTextSplits> LoadByteText(const std::string& path, const ByteTextOptions& options,
                                            const std::string& root = "");

// `size` windows of uniformly random tokens in [0, vocab_size), generated on
// demand from (seed, index). Uses no memory per sample.
class SyntheticTokenDataset : public Dataset {
 public:
  SyntheticTokenDataset(int64_t size, uint64_t seed, int64_t context, int vocab_size = kByteVocabSize);

  int64_t size() const override { return size_; }
  Batch NewBatch(int64_t batch_size) const override;
  void Get(int64_t index, int64_t slot, Batch* batch) const override;

 private:
  int64_t size_;
  uint64_t seed_;
  int64_t context_;
  int vocab_size_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_TEXT_DATASET_H_
