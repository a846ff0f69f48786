#include "engine/data/distributed_sampler.h"

#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "engine/core/check.h"
#include "engine/data/random.h"

namespace ringmaster::engine {

absl::StatusOr<DistributedSampler> DistributedSampler::Create(int64_t dataset_size, const SamplerOptions& options) {
  const int64_t b = options.global_batch;
  const int w = options.world_size;
  if (b <= 0 || w <= 0 || b % w != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("global batch %d must be positive and divisible by the world size %d", b, w));
  }
  if (options.rank < 0 || options.rank >= w) {
    return absl::InvalidArgumentError(absl::StrFormat("rank %d is outside [0, %d)", options.rank, w));
  }
  if (options.micro_batches <= 0 || (b / w) % options.micro_batches != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d micro-batches do not divide the local batch of %d", options.micro_batches, b / w));
  }
  if (dataset_size < b) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the dataset has %d samples, fewer than one global batch of %d", dataset_size, b));
  }
  return DistributedSampler(dataset_size, options);
}

const std::vector<int64_t>& DistributedSampler::Order(int64_t epoch) {
  ENGINE_CHECK(epoch >= 0, "epoch {}", epoch);
  if (epoch == cached_epoch_) return order_;
  order_.resize(dataset_size_);
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (options_.shuffle) {
    // Fisher-Yates with a generator seeded from (seed, epoch).
    Rng rng(MixSeed(options_.seed, static_cast<uint64_t>(epoch)));
    for (int64_t i = dataset_size_ - 1; i > 0; --i) {
      std::swap(order_[i], order_[UniformBelow(rng, static_cast<uint64_t>(i) + 1)]);
    }
  }
  cached_epoch_ = epoch;
  return order_;
}

std::vector<int64_t> DistributedSampler::Range(int64_t epoch, int64_t batch, int64_t offset, int64_t count) {
  ENGINE_CHECK(batch >= 0 && batch < batches_per_epoch(), "batch {} of {}", batch, batches_per_epoch());
  const std::vector<int64_t>& order = Order(epoch);
  const auto first = order.begin() + batch * options_.global_batch + offset;
  return std::vector<int64_t>(first, first + count);
}

std::vector<int64_t> DistributedSampler::GlobalBatch(int64_t epoch, int64_t batch) {
  return Range(epoch, batch, 0, options_.global_batch);
}

std::vector<int64_t> DistributedSampler::LocalBatch(int64_t epoch, int64_t batch) {
  return Range(epoch, batch, options_.rank * local_batch(), local_batch());
}

std::vector<int64_t> DistributedSampler::MicroBatch(int64_t epoch, int64_t batch, int micro) {
  ENGINE_CHECK(micro >= 0 && micro < options_.micro_batches, "micro-batch {} of {}", micro, options_.micro_batches);
  return Range(epoch, batch, options_.rank * local_batch() + micro * micro_batch(), micro_batch());
}

}  // namespace ringmaster::engine
