#ifndef RINGMASTER_ENGINE_DATA_DISTRIBUTED_SAMPLER_H_
#define RINGMASTER_ENGINE_DATA_DISTRIBUTED_SAMPLER_H_

// Decides which samples each data-parallel rank sees, batch by batch.
//
// Epoch e orders the dataset by a permutation drawn from (seed, e) (identity
// when shuffle is off), the same on every rank and every machine. The order is
// cut into global batches of B samples; the tail of fewer than B samples is
// dropped, so every epoch has floor(size / B) batches on EVERY rank, whatever
// size % B or size % world_size are: ranks never disagree on the number of
// steps (which would deadlock a collective). A dropped sample is only dropped
// for that epoch; the next permutation differs.
//
// Rank r of W gets the contiguous slice [r * B/W, (r + 1) * B/W) of each global
// batch, so the ranks' slices partition it. A local batch of B/W splits further
// into m micro-batches of B/(W m).
//
// Not thread-safe (it caches the current epoch's permutation); cheap to copy.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::engine {

struct SamplerOptions {
  int64_t global_batch = 0;  // B: samples per step across all ranks
  int world_size = 1;        // W: data-parallel ranks
  int rank = 0;              // this rank, in [0, W)
  uint64_t seed = 0;
  bool shuffle = true;
  int micro_batches = 1;  // m: micro-batches per local batch
};

class DistributedSampler {
 public:
  // INVALID_ARGUMENT unless B > 0, W divides B, 0 <= rank < W, m divides B/W,
  // and the dataset holds at least one global batch.
  static absl::StatusOr<DistributedSampler> Create(int64_t dataset_size, const SamplerOptions& options);

  int64_t dataset_size() const { return dataset_size_; }
  const SamplerOptions& options() const { return options_; }
  int64_t batches_per_epoch() const { return dataset_size_ / options_.global_batch; }
  int64_t local_batch() const { return options_.global_batch / options_.world_size; }
  int64_t micro_batch() const { return local_batch() / options_.micro_batches; }

  // The order of all samples in `epoch` (a permutation of [0, dataset_size)).
  std::vector<int64_t> EpochOrder(int64_t epoch) { return Order(epoch); }

  // Sample indices of global batch `batch` of `epoch`, all ranks in rank order.
  std::vector<int64_t> GlobalBatch(int64_t epoch, int64_t batch);
  // This rank's slice of it (local_batch() indices).
  std::vector<int64_t> LocalBatch(int64_t epoch, int64_t batch);
  // Micro-batch `micro` of this rank's slice (micro_batch() indices).
  std::vector<int64_t> MicroBatch(int64_t epoch, int64_t batch, int micro);

 private:
  DistributedSampler(int64_t dataset_size, const SamplerOptions& options)
      : dataset_size_(dataset_size), options_(options) {}

  // The cached permutation of `epoch`, computed on first use.
  const std::vector<int64_t>& Order(int64_t epoch);
  std::vector<int64_t> Range(int64_t epoch, int64_t batch, int64_t offset, int64_t count);

  int64_t dataset_size_;
  SamplerOptions options_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_DISTRIBUTED_SAMPLER_H_
