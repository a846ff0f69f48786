#include "engine/data/text_dataset.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/checkpoint/file_io.h"
#include "engine/data/data_file.h"
#include "engine/core/check.h"
#include "engine/data/random.h"

namespace ringmaster::engine {
namespace {

Batch NewTokenBatch(int64_t batch_size, int64_t context) {
  Batch batch;
  batch.tokens = Tensor::Zeros({batch_size, context}, DType::kI32);
  batch.targets = Tensor::Zeros({batch_size, context}, DType::kI32);
  return batch;
}

void CheckSlot(const Batch& batch, int64_t slot, int64_t context) {
  ENGINE_CHECK(slot >= 0 && slot < batch.size() && batch.tokens.defined() && batch.tokens.rank() == 2 &&
                   batch.tokens.dim(1) == context && batch.targets.shape() == batch.tokens.shape(),
               "slot {} does not fit a token batch of {} x {}", slot, batch.size(), context);
}

}  // namespace

ByteTextDataset::ByteTextDataset(std::shared_ptr<const std::string> text, int64_t begin, int64_t length,
                                 int64_t context, int64_t stride)
    : text_(std::move(text)),
      begin_(begin),
      context_(context),
      stride_(stride),
      size_((length - context - 1) / stride + 1) {}

absl::StatusOr<std::unique_ptr<ByteTextDataset>> ByteTextDataset::Create(std::shared_ptr<const std::string> text,
                                                                         int64_t begin, int64_t length, int64_t context,
                                                                         int64_t stride) {
  if (context < 1 || stride < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("context %d and stride %d must be >= 1", context, stride));
  }
  const int64_t text_size = static_cast<int64_t>(text->size());
  if (begin < 0 || length < 0 || begin + length > text_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bytes [%d, %d) are outside the text of %d bytes", begin, begin + length, text_size));
  }
  if (length < context + 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d bytes are fewer than one window of context %d + 1", length, context));
  }
  return std::unique_ptr<ByteTextDataset>(new ByteTextDataset(std::move(text), begin, length, context, stride));
}

Batch ByteTextDataset::NewBatch(int64_t batch_size) const { return NewTokenBatch(batch_size, context_); }

void ByteTextDataset::Get(int64_t index, int64_t slot, Batch* batch) const {
  ENGINE_CHECK(index >= 0 && index < size_, "index {} of {}", index, size_);
  CheckSlot(*batch, slot, context_);
  const auto* window = reinterpret_cast<const unsigned char*>(text_->data()) + WindowStart(index);
  int32_t* inputs = batch->tokens.i32() + slot * context_;
  int32_t* targets = batch->targets.i32() + slot * context_;
  for (int64_t t = 0; t < context_; ++t) {
    inputs[t] = window[t];
    targets[t] = window[t + 1];
  }
}

absl::StatusOr<ByteTextSplits> LoadByteText(const std::string& path, const ByteTextOptions& options,
                                            const std::string& root) {
  if (!(options.held_out_fraction > 0 && options.held_out_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: held-out fraction %g is outside (0, 1)", path, options.held_out_fraction));
  }
  ASSIGN_OR_RETURN(UniqueFd fd, OpenDataFile(path, root));
  ASSIGN_OR_RETURN(std::string contents, ReadFd(fd.get(), path));
  auto text = std::make_shared<const std::string>(std::move(contents));
  const int64_t total = static_cast<int64_t>(text->size());
  const int64_t held_out = static_cast<int64_t>(std::floor(total * options.held_out_fraction));
  const int64_t train = total - held_out;
  ByteTextSplits splits;
  auto made = ByteTextDataset::Create(text, 0, train, options.context, options.stride);
  if (!made.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: training split: %s", path, made.status().message()));
  }
  splits.train = std::move(made).value();
  made = ByteTextDataset::Create(text, train, held_out, options.context, options.stride);
  if (!made.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: held-out split: %s", path, made.status().message()));
  }
  splits.held_out = std::move(made).value();
  return splits;
}

SyntheticTokenDataset::SyntheticTokenDataset(int64_t size, uint64_t seed, int64_t context, int vocab_size)
    : size_(size), seed_(seed), context_(context), vocab_size_(vocab_size) {
  ENGINE_CHECK(size_ >= 0 && context_ >= 1 && vocab_size_ > 0, "size {}, context {}, vocabulary {}", size_, context_,
               vocab_size_);
}

Batch SyntheticTokenDataset::NewBatch(int64_t batch_size) const { return NewTokenBatch(batch_size, context_); }

void SyntheticTokenDataset::Get(int64_t index, int64_t slot, Batch* batch) const {
  ENGINE_CHECK(index >= 0 && index < size_, "index {} of {}", index, size_);
  CheckSlot(*batch, slot, context_);
  Rng rng(MixSeed(seed_, static_cast<uint64_t>(index)));
  int32_t* inputs = batch->tokens.i32() + slot * context_;
  int32_t* targets = batch->targets.i32() + slot * context_;
  int32_t previous = static_cast<int32_t>(UniformBelow(rng, vocab_size_));
  for (int64_t t = 0; t < context_; ++t) {
    const int32_t next = static_cast<int32_t>(UniformBelow(rng, vocab_size_));
    inputs[t] = previous;
    targets[t] = next;
    previous = next;
  }
}

}  // namespace ringmaster::engine
