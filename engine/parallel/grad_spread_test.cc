// GradSpread: which grads a rank's norm reads and over which groups the
// partial sums are added, checked on the CPU backend with in-process groups:
// the partial sums of every layout add up to the norm of the whole reduced
// gradient, and one rank's overflow reaches every rank.
#include "engine/parallel/grad_spread.h"

#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "engine/core/cpu_backend.h"
#include "engine/dist/in_process_group.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

double SumSquares(const std::vector<Tensor>& grads) {
  double sum = 0.0;
  for (const Tensor& g : grads) {
    for (int64_t i = 0; i < g.numel(); ++i) sum += static_cast<double>(g.f32()[i]) * g.f32()[i];
  }
  return sum;
}

std::vector<Parameter> MakeParams(const std::vector<int64_t>& sizes, float base) {
  std::vector<Parameter> params(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    params[i].name = "p" + std::to_string(i);
    params[i].value = Tensor::Zeros({sizes[i]});
    params[i].grad = Tensor::Zeros({sizes[i]});
    for (int64_t k = 0; k < sizes[i]; ++k) params[i].grad.f32()[k] = base + 0.25f * static_cast<float>(i * 7 + k);
  }
  return params;
}

ParameterList List(std::vector<Parameter>& params) {
  ParameterList list;
  for (Parameter& p : params) list.push_back(&p);
  return list;
}

TEST(GradSpreadTest, LaterPipelineStagesLeaveTiedParametersOut) {
  std::vector<Parameter> params = MakeParams({3, 4, 5}, 1.0f);
  ParameterList all = List(params);
  ParameterList tied = {&params[1]};
  EXPECT_EQ(PipelineNormParameters(all, tied, 0), all);
  EXPECT_EQ(PipelineNormParameters(all, tied, 1), (ParameterList{&params[0], &params[2]}));
  EXPECT_EQ(PipelineNormParameters(all, {}, 2), all);

  auto world = dist::InProcessWorld::Create(1, {"pp", absl::Seconds(30)});
  std::unique_ptr<dist::InProcessGroup> pipeline = world->Group(0);
  GradSpread stage1 = SpreadOfGrads(all, tied, 1, nullptr, nullptr, pipeline.get());
  ASSERT_EQ(stage1.grads.size(), 2u);
  EXPECT_EQ(stage1.grads[0].raw(), params[0].grad.raw());
  EXPECT_EQ(stage1.grads[1].raw(), params[2].grad.raw());
  EXPECT_EQ(stage1.groups, (std::vector<dist::ProcessGroup*>{pipeline.get()}));

  // Plain data parallelism: the whole (already reduced) gradient, nothing to add.
  GradSpread plain = SpreadOfGrads(all, {}, 0, nullptr, pipeline.get(), nullptr);
  EXPECT_EQ(plain.grads.size(), 3u);
  EXPECT_TRUE(plain.groups.empty());
}

// ZeRO-1 over 3 ranks: each rank's shard of the averaged grads, summed over
// the data group, is the sum of squares of the whole averaged gradient (what
// ZeroOptimizer::GradSumSquares gives); an inf in one rank's shard sets every
// rank's flag.
TEST(GradSpreadTest, ZeroShardsAddUpToTheWholeNormAndShareTheOverflow) {
  constexpr int kRanks = 3;
  auto world = dist::InProcessWorld::Create(kRanks, {"dp", absl::Seconds(30)});
  CpuBackend backend(CpuBackendConfig{1, DType::kF32});
  optim::OptimizerConfig config;
  config.kind = optim::OptimizerKind::kSgd;
  config.lr = 0.1f;
  // The averaged gradient: the mean of the ranks' base values 1, 2, 3 is 2.
  std::vector<Parameter> expected = MakeParams({5, 7, 2}, 2.0f);
  const double whole = SumSquares({expected[0].grad, expected[1].grad, expected[2].grad});

  std::vector<double> partial_sum(kRanks), zero_sum(kRanks);
  std::vector<float> flag(kRanks);
  std::vector<size_t> shard_elements(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
      std::vector<Parameter> params = MakeParams({5, 7, 2}, 1.0f + r);
      auto zero = ZeroOptimizer::Create(config, List(params), *group, backend);
      ASSERT_TRUE(zero.ok()) << zero.status();
      ASSERT_TRUE((*zero)->ReduceScatterGradients().ok());
      GradSpread spread = SpreadOfGrads(List(params), {}, 0, zero->get(), group.get(), nullptr);
      ASSERT_EQ(spread.groups, (std::vector<dist::ProcessGroup*>{group.get()}));
      shard_elements[r] = 0;
      for (const Tensor& g : spread.grads) shard_elements[r] += g.numel();
      Tensor sum = Tensor::FromVector({1}, {static_cast<float>(SumSquares(spread.grads))});
      ASSERT_TRUE(SumOverGroups(spread.groups, sum).ok());
      partial_sum[r] = sum.f32()[0];
      auto exact = (*zero)->GradSumSquares();
      ASSERT_TRUE(exact.ok()) << exact.status();
      zero_sum[r] = *exact;
      // Rank 1 finds an inf in its shard.
      Tensor found = Tensor::FromVector({1}, {0.0f});
      if (r == 1) {
        spread.grads[0].f32()[0] = std::numeric_limits<float>::infinity();
        found.f32()[0] = std::isfinite(SumSquares(spread.grads)) ? 0.0f : 1.0f;
      }
      ASSERT_TRUE(SumOverGroups(spread.groups, found).ok());
      flag[r] = found.f32()[0];
    });
  }
  for (std::thread& t : threads) t.join();
  size_t total_elements = 0;
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(r);
    total_elements += shard_elements[r];
    EXPECT_NEAR(partial_sum[r], whole, 1e-5 * whole);
    EXPECT_NEAR(zero_sum[r], whole, 1e-9 * whole);
    EXPECT_EQ(flag[r], 1.0f);
  }
  EXPECT_EQ(total_elements, 14u);  // the shards partition the gradient
}

}  // namespace
}  // namespace ringmaster::engine::parallel
