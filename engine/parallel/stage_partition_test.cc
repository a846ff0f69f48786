// Stage partitioning: explicit boundaries, the balanced (min-bottleneck)
// split against brute force, the FLOP estimate per block, and the errors.

#include "engine/parallel/stage_partition.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

#include "engine/parallel/stage_partition_cost.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

using P = StagePartition;

double Bottleneck(const std::vector<double>& costs, const StagePartition& p) {
  std::vector<double> c = StageCosts(costs, p);
  return *std::max_element(c.begin(), c.end());
}

// The smallest bottleneck over every split of the blocks into `stages` non-empty stages.
double BruteForceBottleneck(const std::vector<double>& costs, int stages) {
  const int n = static_cast<int>(costs.size());
  double best = std::numeric_limits<double>::infinity();
  std::function<void(int, int, double)> go = [&](int begin, int left, double worst) {
    if (left == 1) {
      double c = 0;
      for (int i = begin; i < n; ++i) c += costs[i];
      best = std::min(best, std::max(worst, c));
      return;
    }
    double c = 0;
    for (int end = begin + 1; end + left - 1 <= n; ++end) {
      c += costs[end - 1];
      go(end, left - 1, std::max(worst, c));
    }
  };
  go(0, stages, 0.0);
  return best;
}

TEST(StagePartitionTest, FromBoundaries) {
  EXPECT_EQ(PartitionFromBoundaries(6, 3, {2, 5}).value(), (P{{0, 2}, {2, 5}, {5, 6}}));
  EXPECT_EQ(PartitionFromBoundaries(4, 1, {}).value(), (P{{0, 4}}));
  EXPECT_EQ(PartitionString(PartitionFromBoundaries(4, 2, {1}).value()), "[0, 1) [1, 4)");
}

TEST(StagePartitionTest, FromBoundariesErrors) {
  auto code = [](int n, int p, std::vector<int> b) { return PartitionFromBoundaries(n, p, b).status().code(); };
  EXPECT_EQ(code(4, 5, {1, 2, 3, 4}), absl::StatusCode::kInvalidArgument);  // more stages than blocks
  EXPECT_EQ(code(4, 0, {}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(4, 2, {}), absl::StatusCode::kInvalidArgument);      // wrong count
  EXPECT_EQ(code(4, 2, {1, 2}), absl::StatusCode::kInvalidArgument);  // wrong count
  EXPECT_EQ(code(4, 3, {2, 2}), absl::StatusCode::kInvalidArgument);  // not increasing
  EXPECT_EQ(code(4, 3, {3, 2}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(4, 2, {0}), absl::StatusCode::kInvalidArgument);  // empty first stage
  EXPECT_EQ(code(4, 2, {4}), absl::StatusCode::kInvalidArgument);  // empty last stage
  EXPECT_NE(PartitionFromBoundaries(4, 5, {1, 2, 3, 4}).status().message().find("5 stages need at least 5 blocks"),
            std::string::npos);
}

TEST(StagePartitionTest, BalancedSimpleCases) {
  EXPECT_EQ(PartitionBalanced({1, 1, 1, 1, 1, 1, 1, 1}, 4).value(), (P{{0, 2}, {2, 4}, {4, 6}, {6, 8}}));
  EXPECT_EQ(PartitionBalanced({1, 1, 1, 1, 4}, 2).value(), (P{{0, 4}, {4, 5}}));
  EXPECT_EQ(PartitionBalanced({9, 1, 1, 1}, 2).value(), (P{{0, 1}, {1, 4}}));
  // Ties: the earlier stages get the fewer blocks.
  EXPECT_EQ(PartitionBalanced({1, 1, 1, 1, 1}, 2).value(), (P{{0, 2}, {2, 5}}));
  EXPECT_EQ(PartitionBalanced({1, 1, 1}, 3).value(), (P{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(PartitionBalanced({0, 0, 0}, 2).value(), (P{{0, 1}, {1, 3}}));
}

TEST(StagePartitionTest, BalancedIsOptimalAgainstBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.0, 10.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + trial % 9;
    std::vector<double> costs(n);
    for (double& c : costs) c = cost(rng);
    for (int p = 1; p <= n; ++p) {
      StagePartition part = PartitionBalanced(costs, p).value();
      ASSERT_EQ(static_cast<int>(part.size()), p);
      int begin = 0;
      for (const StageRange& r : part) {  // contiguous, non-empty, covering
        ASSERT_EQ(r.begin, begin);
        ASSERT_GT(r.size(), 0);
        begin = r.end;
      }
      ASSERT_EQ(begin, n);
      EXPECT_NEAR(Bottleneck(costs, part), BruteForceBottleneck(costs, p), 1e-9) << PartitionString(part);
    }
  }
}

TEST(StagePartitionTest, BalancedErrors) {
  EXPECT_EQ(PartitionBalanced({1, 2}, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionBalanced({1, 2}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionBalanced({}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionBalanced({1, -1}, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionBalanced({1, std::nan("")}, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StageCostTest, MlpFlopsAreTheGemmsPlusElementwise) {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kMlp;
  c.input_channels = 1;
  c.input_height = 4;
  c.input_width = 4;
  c.hidden_sizes = {8, 6};
  c.num_classes = 3;
  std::vector<double> flops = EstimateBlockFlops(c, SampleInput(c, 2)).value();
  // block: Linear (2 * B * in * out + B * out for the bias) + ReLU (B * out); last: Linear only.
  EXPECT_EQ(flops, (std::vector<double>{2 * 2 * 16 * 8 + 2 * 8 + 2 * 8, 2 * 2 * 8 * 6 + 2 * 6 + 2 * 6,
                                        2 * 2 * 6 * 3 + 2 * 3}));
}

TEST(StageCostTest, CnnConvStagesDominateAndAreSplitFromTheHead) {
  nn::ModelConfig c;  // the Fashion-MNIST CNN: conv 1->32, conv 32->64, Linear 3136->128, Linear 128->10
  c.kind = nn::ModelKind::kCnn;
  std::vector<double> flops = EstimateBlockFlops(c, SampleInput(c, 1)).value();
  ASSERT_EQ(flops.size(), 4u);
  EXPECT_EQ(flops[1], *std::max_element(flops.begin(), flops.end()));   // conv 32->64 at 14x14
  EXPECT_GT(flops[1], 2 * 14 * 14 * 64 * 32 * 9 - 1.0);                // at least its convolution
  EXPECT_EQ(PartitionBalanced(flops, 2).value(), (P{{0, 2}, {2, 4}}));
}

TEST(StageCostTest, GptBalancesTransformerLayers) {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kGpt;
  c.n_layer = 4;
  c.n_embd = 32;
  c.n_head = 2;
  c.block_size = 16;
  c.vocab_size = 64;
  std::vector<double> flops = EstimateBlockFlops(c, SampleInput(c, 1)).value();
  ASSERT_EQ(flops.size(), 6u);
  for (int i = 2; i <= 4; ++i) EXPECT_EQ(flops[i], flops[1]);  // identical layers
  EXPECT_LT(flops[0], flops[1] / 10);                         // the embedding is a lookup
  EXPECT_EQ(PartitionBalanced(flops, 2).value(), (P{{0, 3}, {3, 6}}));
  EXPECT_EQ(PartitionModel(c, 6, 2, {}).value(), (P{{0, 3}, {3, 6}}));
  EXPECT_EQ(PartitionModel(c, 6, 2, {1}).value(), (P{{0, 1}, {1, 6}}));
  EXPECT_EQ(PartitionModel(c, 6, 7, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionModel(c, 5, 2, {}).status().code(), absl::StatusCode::kInvalidArgument);  // wrong block count
}

}  // namespace
}  // namespace ringmaster::engine::parallel
