#ifndef RINGMASTER_ENGINE_DATA_DATA_LOADER_H_
#define RINGMASTER_ENGINE_DATA_DATA_LOADER_H_

// Yields this rank's batches, epoch after epoch, assembled ahead of time on a
// background thread into a bounded queue.
//
// The sequence of batches depends only on the dataset, the sampler options and
// the position it starts from, never on thread timing: the prefetch thread
// builds batches strictly in order, and State() is the position of the next
// batch Next() will return (not of what is already prefetched). Restore(State())
// on a loader with the same dataset and options, in this process or another,
// yields exactly the batches the original would have yielded.
//
// Thread-compatible: call Next, State and Restore from one thread at a time
// (the training loop); the prefetch thread is internal. The destructor stops
// and joins it.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/data/batch.h"
#include "engine/data/dataset.h"
#include "engine/data/distributed_sampler.h"

namespace ringmaster::engine {

// A loader position: the next batch is batch `batch` of epoch `epoch`, in the
// order drawn from `seed`.
struct LoaderState {
  int64_t epoch = 0;
  int64_t batch = 0;
  uint64_t seed = 0;

  // "epoch=3 batch=17 seed=42", for a checkpoint's state.json.
  std::string Encode() const;
  // The inverse of Encode; INVALID_ARGUMENT naming the text otherwise.
  static absl::StatusOr<LoaderState> Decode(absl::string_view text);

  bool operator==(const LoaderState& other) const {
    return epoch == other.epoch && batch == other.batch && seed == other.seed;
  }
};

struct LoaderOptions {
  SamplerOptions sampler;  // its seed is the initial LoaderState::seed
  int prefetch = 4;        // batches assembled ahead, >= 1
};

class DataLoader {
 public:
  // Starts at epoch 0, batch 0. INVALID_ARGUMENT for bad sampler options
  // (see DistributedSampler::Create) or prefetch < 1.
  static absl::StatusOr<std::unique_ptr<DataLoader>> Create(std::shared_ptr<const Dataset> dataset,
                                                            const LoaderOptions& options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // This rank's next local batch (sampler().local_batch() samples); blocks
  // until the prefetch thread has it. Never ends: after the last batch of an
  // epoch comes batch 0 of the next.
  Batch Next();

  // Position of the batch the next Next() returns.
  LoaderState State() const;

  // Continues from `state` (which may carry another seed); drops what was
  // prefetched. INVALID_ARGUMENT if epoch < 0 or batch is outside
  // [0, batches_per_epoch()); the loader's position is then unchanged.
  absl::Status Restore(const LoaderState& state);

  int64_t batches_per_epoch() const { return sampler_.batches_per_epoch(); }
  int64_t local_batch() const { return sampler_.local_batch(); }

 private:
  DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler, int prefetch);

  void StartWorker(LoaderState from);
  void StopWorker();
  void Work(LoaderState position);
  Batch Assemble(const LoaderState& position);
  void Advance(LoaderState* position) const;

  const std::shared_ptr<const Dataset> dataset_;
  const int prefetch_;
  // Used by the worker while it runs; Restore stops the worker before changing it.
  DistributedSampler sampler_;
  LoaderState next_;  // owner thread only

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> queue_;  // guarded by mutex_
  bool stop_ = false;        // guarded by mutex_
  std::thread worker_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_DATA_LOADER_H_
