#include "engine/data/distributed_sampler.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

DistributedSampler Make(int64_t size, int64_t global_batch, int world, int rank, uint64_t seed = 1, int micro = 1) {
  SamplerOptions options;
  options.global_batch = global_batch;
  options.world_size = world;
  options.rank = rank;
  options.seed = seed;
  options.micro_batches = micro;
  absl::StatusOr<DistributedSampler> sampler = DistributedSampler::Create(size, options);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *sampler;
}

TEST(DistributedSamplerTest, EpochOrderIsAPermutation) {
  DistributedSampler sampler = Make(1001, 10, 1, 0);
  std::vector<int64_t> order = sampler.EpochOrder(3);
  std::vector<int64_t> identity(1001);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(order, identity);
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, identity);
}

TEST(DistributedSamplerTest, RanksGetEqualBatchCountsAndDisjointSlicesForAnySize) {
  for (int64_t size : {96, 97, 100, 101, 1003}) {
    for (int world : {1, 3, 4}) {
      const int64_t global_batch = 4 * world;
      std::vector<DistributedSampler> ranks;
      for (int r = 0; r < world; ++r) ranks.push_back(Make(size, global_batch, world, r, 5));
      const int64_t batches = ranks[0].batches_per_epoch();
      EXPECT_EQ(batches, size / global_batch) << size << " " << world;
      std::set<int64_t> seen;
      for (int64_t b = 0; b < batches; ++b) {
        std::vector<int64_t> joined;
        for (DistributedSampler& rank : ranks) {
          ASSERT_EQ(rank.batches_per_epoch(), batches) << "ranks disagree at size " << size;
          std::vector<int64_t> local = rank.LocalBatch(2, b);
          ASSERT_EQ(static_cast<int64_t>(local.size()), global_batch / world);
          joined.insert(joined.end(), local.begin(), local.end());
        }
        // The ranks' slices, in rank order, are the global batch.
        EXPECT_EQ(joined, ranks[0].GlobalBatch(2, b));
        for (int64_t index : joined) {
          ASSERT_TRUE(index >= 0 && index < size);
          ASSERT_TRUE(seen.insert(index).second) << "index " << index << " used twice in an epoch";
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), batches * global_batch);
    }
  }
}

TEST(DistributedSamplerTest, ReshufflesByEpochAndReproducesBySeed) {
  DistributedSampler a = Make(500, 50, 2, 1, 7), b = Make(500, 50, 2, 1, 7), c = Make(500, 50, 2, 1, 8);
  EXPECT_EQ(a.LocalBatch(0, 3), b.LocalBatch(0, 3));
  EXPECT_EQ(a.LocalBatch(4, 9), b.LocalBatch(4, 9));
  EXPECT_NE(a.LocalBatch(0, 3), a.LocalBatch(1, 3));
  EXPECT_NE(a.EpochOrder(0), a.EpochOrder(1));
  EXPECT_NE(a.LocalBatch(0, 3), c.LocalBatch(0, 3));
  // Going back to an earlier epoch gives the same order again.
  const std::vector<int64_t> epoch0 = b.EpochOrder(0);
  b.EpochOrder(5);
  EXPECT_EQ(b.EpochOrder(0), epoch0);
}

TEST(DistributedSamplerTest, WithoutShuffleTheOrderIsSequential) {
  SamplerOptions options;
  options.global_batch = 4;
  options.world_size = 2;
  options.rank = 1;
  options.shuffle = false;
  absl::StatusOr<DistributedSampler> sampler = DistributedSampler::Create(10, options);
  ASSERT_TRUE(sampler.ok());
  EXPECT_EQ(sampler->LocalBatch(0, 1), (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(sampler->LocalBatch(7, 1), (std::vector<int64_t>{6, 7}));
}

TEST(DistributedSamplerTest, MicroBatchesSplitTheLocalBatch) {
  DistributedSampler sampler = Make(1000, 24, 2, 1, 3, 3);
  EXPECT_EQ(sampler.local_batch(), 12);
  EXPECT_EQ(sampler.micro_batch(), 4);
  std::vector<int64_t> joined;
  for (int m = 0; m < 3; ++m) {
    std::vector<int64_t> micro = sampler.MicroBatch(1, 5, m);
    joined.insert(joined.end(), micro.begin(), micro.end());
  }
  EXPECT_EQ(joined, sampler.LocalBatch(1, 5));
}

TEST(DistributedSamplerTest, RejectsInconsistentOptions) {
  SamplerOptions options;
  options.global_batch = 10;
  options.world_size = 4;
  EXPECT_EQ(DistributedSampler::Create(100, options).status(),
            absl::InvalidArgumentError("global batch 10 must be positive and divisible by the world size 4"));
  options.world_size = 2;
  options.rank = 2;
  EXPECT_EQ(DistributedSampler::Create(100, options).status(), absl::InvalidArgumentError("rank 2 is outside [0, 2)"));
  options.rank = 0;
  options.micro_batches = 2;
  EXPECT_EQ(DistributedSampler::Create(100, options).status(),
            absl::InvalidArgumentError("2 micro-batches do not divide the local batch of 5"));
  options.micro_batches = 1;
  EXPECT_EQ(DistributedSampler::Create(9, options).status(),
            absl::InvalidArgumentError("the dataset has 9 samples, fewer than one global batch of 10"));
}

}  // namespace
}  // namespace ringmaster::engine
