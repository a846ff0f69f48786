#include "engine/data/data_loader.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "engine/core/check.h"

namespace ringmaster::engine {

std::string LoaderState::Encode() const { return absl::StrFormat("epoch=%d batch=%d seed=%d", epoch, batch, seed); }

absl::StatusOr<LoaderState> LoaderState::Decode(absl::string_view text) {
  std::vector<absl::string_view> fields = absl::StrSplit(text, ' ');
  LoaderState state;
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrFormat("data loader state \"%s\" is not \"epoch=E batch=B seed=S\"", text));
  };
  if (fields.size() != 3) return bad();
  const std::pair<absl::string_view, absl::string_view> epoch = absl::StrSplit(fields[0], absl::MaxSplits('=', 1));
  const std::pair<absl::string_view, absl::string_view> batch = absl::StrSplit(fields[1], absl::MaxSplits('=', 1));
  const std::pair<absl::string_view, absl::string_view> seed = absl::StrSplit(fields[2], absl::MaxSplits('=', 1));
  if (epoch.first != "epoch" || batch.first != "batch" || seed.first != "seed" ||
      !absl::SimpleAtoi(epoch.second, &state.epoch) || !absl::SimpleAtoi(batch.second, &state.batch) ||
      !absl::SimpleAtoi(seed.second, &state.seed)) {
    return bad();
  }
  return state;
}

absl::StatusOr<std::unique_ptr<DataLoader>> DataLoader::Create(std::shared_ptr<const Dataset> dataset,
                                                               const LoaderOptions& options) {
  if (options.prefetch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat("prefetch %d must be >= 1", options.prefetch));
  }
  ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::Create(dataset->size(), options.sampler));
  return std::unique_ptr<DataLoader>(new DataLoader(std::move(dataset), std::move(sampler), options.prefetch));
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler, int prefetch)
    : dataset_(std::move(dataset)), prefetch_(prefetch), sampler_(std::move(sampler)) {
  next_.seed = sampler_.options().seed;
  StartWorker(next_);
}

DataLoader::~DataLoader() { StopWorker(); }

Batch DataLoader::Next() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !queue_.empty(); });
  Batch batch = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  changed_.notify_all();
  ENGINE_CHECK(batch.epoch == next_.epoch && batch.index == next_.batch, "got batch {}.{}, expected {}.{}", batch.epoch,
               batch.index, next_.epoch, next_.batch);
  Advance(&next_);
  return batch;
}

LoaderState DataLoader::State() const { return next_; }

absl::Status DataLoader::Restore(const LoaderState& state) {
  if (state.epoch < 0 || state.batch < 0 || state.batch >= batches_per_epoch()) {
    return absl::InvalidArgumentError(absl::StrFormat("cannot restore the data loader to \"%s\": %d batches per epoch",
                                                      state.Encode(), batches_per_epoch()));
  }
  StopWorker();
  queue_.clear();
  if (state.seed != sampler_.options().seed) {
    SamplerOptions options = sampler_.options();
    options.seed = state.seed;
    absl::StatusOr<DistributedSampler> sampler = DistributedSampler::Create(dataset_->size(), options);
    ENGINE_CHECK(sampler.ok(), "options that were valid became invalid: {}", sampler.status().ToString());
    sampler_ = *std::move(sampler);
  }
  next_ = state;
  StartWorker(next_);
  return absl::OkStatus();
}

void DataLoader::StartWorker(LoaderState from) {
  stop_ = false;
  worker_ = std::thread([this, from] { Work(from); });
}

void DataLoader::StopWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void DataLoader::Work(LoaderState position) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stop_ || static_cast<int>(queue_.size()) < prefetch_; });
      if (stop_) return;
    }
    Batch batch = Assemble(position);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
      queue_.push_back(std::move(batch));
    }
    changed_.notify_all();
    Advance(&position);
  }
}

Batch DataLoader::Assemble(const LoaderState& position) {
  const std::vector<int64_t> indices = sampler_.LocalBatch(position.epoch, position.batch);
  Batch batch = dataset_->NewBatch(static_cast<int64_t>(indices.size()));
  batch.epoch = position.epoch;
  batch.index = position.batch;
  for (size_t slot = 0; slot < indices.size(); ++slot) dataset_->Get(indices[slot], slot, &batch);
  return batch;
}

void DataLoader::Advance(LoaderState* position) const {
  if (++position->batch == batches_per_epoch()) {
    position->batch = 0;
    ++position->epoch;
  }
}

}  // namespace ringmaster::engine
