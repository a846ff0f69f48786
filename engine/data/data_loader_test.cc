#include "engine/data/data_loader.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/data/image_dataset.h"
#include "engine/data/text_dataset.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

struct Snapshot {
  int64_t epoch, index;
  std::vector<float> images;
  std::vector<int32_t> tokens, targets;
  bool operator==(const Snapshot& o) const {
    return epoch == o.epoch && index == o.index && images == o.images && tokens == o.tokens && targets == o.targets;
  }
};

std::vector<int32_t> Ints(const Tensor& t) {
  return t.defined() ? std::vector<int32_t>(t.i32(), t.i32() + t.numel()) : std::vector<int32_t>{};
}

Snapshot Take(const Batch& batch) {
  return {batch.epoch, batch.index, batch.images.defined() ? batch.images.ToVector() : std::vector<float>{},
          Ints(batch.tokens), Ints(batch.targets)};
}

std::vector<Snapshot> TakeN(DataLoader& loader, int n) {
  std::vector<Snapshot> out;
  for (int i = 0; i < n; ++i) out.push_back(Take(loader.Next()));
  return out;
}

LoaderOptions Options(int64_t global_batch, int world, int rank, uint64_t seed, int prefetch) {
  LoaderOptions options;
  options.sampler.global_batch = global_batch;
  options.sampler.world_size = world;
  options.sampler.rank = rank;
  options.sampler.seed = seed;
  options.prefetch = prefetch;
  return options;
}

std::unique_ptr<DataLoader> MakeLoader(std::shared_ptr<const Dataset> data, const LoaderOptions& options) {
  absl::StatusOr<std::unique_ptr<DataLoader>> loader = DataLoader::Create(std::move(data), options);
  EXPECT_TRUE(loader.ok()) << loader.status();
  return *std::move(loader);
}

int ThreadCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// A joined thread may stay listed for a moment while the kernel finishes its exit.
bool ThreadCountReturnsTo(int expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ThreadCount() != expected) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(DataLoaderTest, YieldsTheSamplersBatchesAcrossEpochsWhateverThePrefetch) {
  auto data = std::make_shared<SyntheticImageDataset>(103, 9);
  const LoaderOptions options = Options(12, 3, 2, 4, 1);
  absl::StatusOr<DistributedSampler> sampler = DistributedSampler::Create(103, options.sampler);
  ASSERT_TRUE(sampler.ok());
  ASSERT_EQ(sampler->batches_per_epoch(), 8);
  std::vector<Snapshot> expected;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (int64_t b = 0; b < 8; ++b) {
      Batch batch = data->NewBatch(4);
      batch.epoch = epoch;
      batch.index = b;
      std::vector<int64_t> indices = sampler->LocalBatch(epoch, b);
      for (int64_t slot = 0; slot < 4; ++slot) data->Get(indices[slot], slot, &batch);
      expected.push_back(Take(batch));
    }
  }
  for (int prefetch : {1, 2, 16}) {
    LoaderOptions with_prefetch = options;
    with_prefetch.prefetch = prefetch;
    std::unique_ptr<DataLoader> loader = MakeLoader(data, with_prefetch);
    EXPECT_EQ(loader->batches_per_epoch(), 8);
    EXPECT_TRUE(TakeN(*loader, 24) == expected) << "prefetch " << prefetch;
    EXPECT_EQ(loader->State(), (LoaderState{3, 0, 4}));
  }
}

TEST(DataLoaderTest, RestoreYieldsExactlyTheBatchesThatWouldHaveFollowed) {
  auto data = std::make_shared<SyntheticTokenDataset>(500, 3, 32);
  std::unique_ptr<DataLoader> original = MakeLoader(data, Options(16, 2, 0, 11, 4));
  ASSERT_EQ(original->batches_per_epoch(), 31);
  TakeN(*original, 29);
  const LoaderState saved = original->State();
  EXPECT_EQ(saved, (LoaderState{0, 29, 11}));
  const std::vector<Snapshot> continued = TakeN(*original, 40);  // crosses into epochs 1 and 2

  // A fresh loader elsewhere, restored from the encoded state.
  absl::StatusOr<LoaderState> decoded = LoaderState::Decode(saved.Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, saved);
  std::unique_ptr<DataLoader> resumed = MakeLoader(data, Options(16, 2, 0, 999, 1));
  TakeN(*resumed, 3);
  ASSERT_TRUE(resumed->Restore(*decoded).ok());
  EXPECT_TRUE(TakeN(*resumed, 40) == continued);

  // The same loader, rewound.
  ASSERT_TRUE(original->Restore(saved).ok());
  EXPECT_TRUE(TakeN(*original, 40) == continued);
}

TEST(DataLoaderTest, RestoreRejectsAPositionOutsideTheEpoch) {
  auto data = std::make_shared<SyntheticTokenDataset>(100, 3, 8);
  std::unique_ptr<DataLoader> loader = MakeLoader(data, Options(10, 1, 0, 1, 2));
  TakeN(*loader, 2);
  EXPECT_EQ(loader->Restore({0, 10, 1}),
            absl::InvalidArgumentError(
                "cannot restore the data loader to \"epoch=0 batch=10 seed=1\": 10 batches per epoch"));
  EXPECT_EQ(loader->State(), (LoaderState{0, 2, 1}));
  EXPECT_EQ(loader->Next().index, 2);
}

TEST(DataLoaderTest, DecodeRejectsMalformedState) {
  EXPECT_EQ(
      LoaderState::Decode("epoch=1 batch=x seed=2").status(),
      absl::InvalidArgumentError("data loader state \"epoch=1 batch=x seed=2\" is not \"epoch=E batch=B seed=S\""));
  EXPECT_FALSE(LoaderState::Decode("epoch=1 batch=2").ok());
}

TEST(DataLoaderTest, NoThreadOutlivesTheLoader) {
  auto data = std::make_shared<SyntheticImageDataset>(1000, 1);
  const int before = ThreadCount();
  {
    std::unique_ptr<DataLoader> loader = MakeLoader(data, Options(8, 1, 0, 1, 2));
    EXPECT_EQ(ThreadCount(), before + 1);
    loader->Next();
    ASSERT_TRUE(loader->Restore({1, 3, 5}).ok());  // restarts the prefetch thread
    EXPECT_EQ(loader->Next().index, 3);
    // Destroyed while its thread waits on a full queue.
  }
  EXPECT_TRUE(ThreadCountReturnsTo(before)) << ThreadCount() << " threads, " << before << " before";
}

TEST(DataLoaderTest, RejectsBadOptions) {
  auto data = std::make_shared<SyntheticImageDataset>(10, 1);
  EXPECT_EQ(DataLoader::Create(data, Options(8, 1, 0, 1, 0)).status(),
            absl::InvalidArgumentError("prefetch 0 must be >= 1"));
  EXPECT_EQ(DataLoader::Create(data, Options(16, 1, 0, 1, 2)).status(),
            absl::InvalidArgumentError("the dataset has 10 samples, fewer than one global batch of 16"));
}

}  // namespace
}  // namespace ringmaster::engine
