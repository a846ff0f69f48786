#ifndef RINGMASTER_ENGINE_DATA_BATCH_H_
#define RINGMASTER_ENGINE_DATA_BATCH_H_

// What a data loader hands the trainer: one batch of samples, in host tensors.

#include <cstdint>

#include "engine/core/tensor.h"

namespace ringmaster::engine {

// One batch of B samples. Image datasets fill `images` and `targets`; token
// datasets fill `tokens` and `targets`.
struct Batch {
  int64_t epoch = 0;
  int64_t index = 0;  // batch index within the epoch

  Tensor images;   // [B, C, H, W] f32, normalised; undefined for token data
  Tensor tokens;   // [B, T] i32 input tokens; undefined for image data
  Tensor targets;  // i32; images: [B] class indices; tokens: [B, T], the token after each input

  int64_t size() const { return targets.defined() ? targets.dim(0) : 0; }
};

// Rows [micro * b, (micro + 1) * b) of `batch`, b = batch.size() / num_micro:
// micro-batch `micro` of `num_micro` (pipeline parallelism, gradient
// accumulation), as views that share the batch's storage. CHECKs that
// num_micro divides the batch and that micro is in range.
Batch MicroBatch(const Batch& batch, int num_micro, int micro);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_BATCH_H_
