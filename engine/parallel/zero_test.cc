// ZeRO-1: the shard layout, the same weights as plain data parallelism for
// every optimizer, ~1/N of the optimizer state per rank, the global gradient
// norm, and errors.

#include "engine/parallel/zero.h"

#include <cmath>
#include <cstdio>
#include <memory>

#include "absl/strings/match.h"
#include "common/status_macros.h"
#include "engine/core/cpu_backend.h"
#include "engine/dist/in_process_group.h"
#include "engine/parallel/testing/dp_harness.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

using testing::Layout;
using testing::Reduction;

Layout ZeroLayout(int world) {
  Layout l;
  l.world = world;
  l.reduction = Reduction::kZero;
  return l;
}

Layout DpLayout(int world) {
  Layout l;
  l.world = world;
  l.dp.bucket_bytes = 4096;
  return l;
}

optim::OptimizerConfig Config(optim::OptimizerKind kind) {
  optim::OptimizerConfig c;
  c.kind = kind;
  switch (kind) {
    case optim::OptimizerKind::kSgd:
      c.lr = 0.05f;
      c.momentum = 0.9f;
      c.weight_decay = 1e-4f;
      break;
    case optim::OptimizerKind::kAdamW:
      c.lr = 1e-3f;
      c.weight_decay = 0.01f;
      break;
    case optim::OptimizerKind::kLars:
      c.lr = 0.5f;
      c.momentum = 0.9f;
      c.weight_decay = 1e-4f;
      c.trust_coefficient = 0.01f;
      break;
    case optim::OptimizerKind::kLamb:
      c.lr = 1e-2f;
      c.weight_decay = 0.01f;
      c.eps = 1e-6f;
      break;
  }
  return c;
}

// Shards of 4 ranks over 3 parameters of 5, 7 and 2 elements (T = 14, S = 4):
// contiguous, cut inside parameters, together covering every element once.
TEST(ZeroTest, ShardsSplitTheFlatParametersAtElementGranularity) {
  auto world = dist::InProcessWorld::Create(4, {"dp", absl::Seconds(30)});
  CpuBackend backend(CpuBackendConfig{1, DType::kF32});
  std::vector<Parameter> params(3);
  const int64_t sizes[] = {5, 7, 2};
  for (int i = 0; i < 3; ++i) {
    params[i].name = "p" + std::to_string(i);
    params[i].value = Tensor::Zeros({sizes[i]});
    params[i].grad = Tensor::Zeros({sizes[i]});
  }
  ParameterList list = {&params[0], &params[1], &params[2]};
  std::vector<std::vector<std::pair<int64_t, int64_t>>> ranges(4);
  for (int r = 0; r < 4; ++r) {
    std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
    absl::StatusOr<std::unique_ptr<ZeroOptimizer>> zero =
        ZeroOptimizer::Create(Config(optim::OptimizerKind::kAdamW), list, *group, backend);
    ASSERT_TRUE(zero.ok()) << zero.status();
    EXPECT_EQ((*zero)->total_elements(), 14);
    EXPECT_EQ((*zero)->shard_begin(), std::min<int64_t>(14, 4 * r));
    EXPECT_EQ((*zero)->shard_end(), std::min<int64_t>(14, 4 * r + 4));
    for (const optim::ParamRange& pr : (*zero)->ranges()) ranges[r].push_back({pr.offset, pr.count});
  }
  using R = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(ranges[0], (R{{0, 4}, {0, 0}, {0, 0}}));
  EXPECT_EQ(ranges[1], (R{{4, 1}, {0, 3}, {0, 0}}));
  EXPECT_EQ(ranges[2], (R{{5, 0}, {3, 4}, {0, 0}}));
  EXPECT_EQ(ranges[3], (R{{5, 0}, {7, 0}, {0, 2}}));
}

struct ZeroCase {
  const char* name;
  nn::ModelConfig model;
  optim::OptimizerKind optimizer;
};

void PrintTo(const ZeroCase& c, std::ostream* os) { *os << c.name; }

class ZeroEquivalenceTest : public ::testing::TestWithParam<ZeroCase> {};

// Same job, same D: ZeRO-1 ends with the weights of plain data parallelism,
// while each rank holds ~1/D of the optimizer state.
TEST_P(ZeroEquivalenceTest, MatchesDataParallelWithAShareOfTheState) {
  testing::Job job;
  job.model = GetParam().model;
  job.optimizer = Config(GetParam().optimizer);
  testing::Job idle = job;
  idle.steps = 0;
  absl::StatusOr<testing::Result> initial = testing::Train(idle, DpLayout(1));
  ASSERT_TRUE(initial.ok()) << initial.status();
  for (int world : {2, 4}) {
    SCOPED_TRACE(world);
    absl::StatusOr<testing::Result> dp = testing::Train(job, DpLayout(world));
    ASSERT_TRUE(dp.ok()) << dp.status();
    absl::StatusOr<testing::Result> zero = testing::Train(job, ZeroLayout(world));
    ASSERT_TRUE(zero.ok()) << zero.status();
    for (int r = 1; r < world; ++r) EXPECT_EQ(zero->weights[r], zero->weights[0]) << "rank " << r;
    const double diff = testing::MaxRelDiff(zero->weights[0], dp->weights[0]);
    EXPECT_LE(diff, 1e-5);
    EXPECT_GT(testing::MaxRelDiff(zero->weights[0], initial->weights[0]), 1e-4) << "training moved nothing";
    const size_t plain = dp->state_bytes[0];
    ASSERT_GT(plain, 0u);
    size_t total = 0;
    for (int r = 0; r < world; ++r) {
      total += zero->state_bytes[r];
      EXPECT_NEAR(static_cast<double>(zero->state_bytes[r]) * world / plain, 1.0, 0.03) << "rank " << r;
    }
    EXPECT_EQ(total, plain);  // the shards partition the state exactly
    std::printf("%s D=%d: weights differ from DP by %.3g; optimizer state per rank %zu bytes (plain %zu, 1/%d = %zu)\n",
                GetParam().name, world, diff, zero->state_bytes[0], plain, world, plain / world);
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ZeroEquivalenceTest,
                         ::testing::Values(ZeroCase{"mlp_sgd", testing::SmallMlp(), optim::OptimizerKind::kSgd},
                                           ZeroCase{"mlp_adamw", testing::SmallMlp(), optim::OptimizerKind::kAdamW},
                                           ZeroCase{"mlp_lars", testing::SmallMlp(), optim::OptimizerKind::kLars},
                                           ZeroCase{"mlp_lamb", testing::SmallMlp(), optim::OptimizerKind::kLamb},
                                           ZeroCase{"cnn_sgd", testing::SmallCnn(4), optim::OptimizerKind::kSgd},
                                           ZeroCase{"cnn_adamw", testing::SmallCnn(4), optim::OptimizerKind::kAdamW},
                                           ZeroCase{"cnn_lars", testing::SmallCnn(4), optim::OptimizerKind::kLars},
                                           ZeroCase{"cnn_lamb", testing::SmallCnn(4), optim::OptimizerKind::kLamb}),
                         [](const ::testing::TestParamInfo<ZeroCase>& info) { return info.param.name; });

// Gradient accumulation: ZeRO reduces the grads accumulated over micro-steps.
TEST(ZeroTest, AccumulatedMicroStepsMatchDataParallel) {
  testing::Job job;
  job.model = testing::SmallCnn(4);
  job.optimizer = Config(optim::OptimizerKind::kAdamW);
  Layout zero = ZeroLayout(2), dp = DpLayout(2);
  zero.micro_steps = dp.micro_steps = 2;
  absl::StatusOr<testing::Result> a = testing::Train(job, zero), b = testing::Train(job, dp);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_LE(testing::MaxRelDiff(a->weights[0], b->weights[0]), 1e-5);
}

// One rank's parameters with rank-dependent gradients g_r[i] = (r + 1) * (i + 1) / 100.
struct Grads {
  std::vector<Parameter> params;
  ParameterList list;
  explicit Grads(int rank) : params(2) {
    const int64_t sizes[] = {6, 3};
    for (int i = 0; i < 2; ++i) {
      params[i].name = "p" + std::to_string(i);
      params[i].value = Tensor::Zeros({sizes[i]});
      std::vector<float> g(sizes[i]);
      for (int64_t j = 0; j < sizes[i]; ++j) g[j] = (rank + 1) * (j + 1 + 10 * i) / 100.0f;
      params[i].grad = Tensor::FromVector({sizes[i]}, g);
      list.push_back(&params[i]);
    }
  }
};

TEST(ZeroTest, GradSumSquaresIsTheGlobalSumOfTheAveragedGradients) {
  auto world = dist::InProcessWorld::Create(3, {"dp", absl::Seconds(30)});
  // Average over ranks of (r + 1) is 2, so the averaged grad is 2 * g_0.
  double expected = 0.0;
  Grads reference(0);
  for (Parameter* p : reference.list)
    for (float g : p->grad.ToVector()) expected += 4.0 * g * g;
  std::vector<double> got(3);
  std::vector<absl::Status> statuses = testing::RunRanks(world, [&](dist::ProcessGroup& group) -> absl::Status {
    CpuBackend backend(CpuBackendConfig{1, DType::kF32});
    Grads grads(group.rank());
    ASSIGN_OR_RETURN(auto zero, ZeroOptimizer::Create(Config(optim::OptimizerKind::kSgd), grads.list, group, backend));
    if (zero->GradSumSquares().status().code() != absl::StatusCode::kFailedPrecondition)
      return absl::InternalError("GradSumSquares before the reduction");
    RETURN_IF_ERROR(zero->ReduceScatterGradients());
    ASSIGN_OR_RETURN(got[group.rank()], zero->GradSumSquares());
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  for (double g : got) EXPECT_NEAR(g, expected, 1e-6 * expected);
}

TEST(ZeroTest, StepNeedsReducedGradientsAndReportsADeadPeer) {
  auto world = dist::InProcessWorld::Create(2, {"dp", absl::Seconds(30)});
  CpuBackend backend(CpuBackendConfig{1, DType::kF32});
  Grads grads(0);
  std::unique_ptr<dist::InProcessGroup> group = world->Group(0);
  absl::StatusOr<std::unique_ptr<ZeroOptimizer>> zero =
      ZeroOptimizer::Create(Config(optim::OptimizerKind::kSgd), grads.list, *group, backend);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ((*zero)->Step(0.1f, 1.0f).code(), absl::StatusCode::kFailedPrecondition);
  world->Kill(1);
  absl::Status status = (*zero)->ReduceScatterGradients();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "reduce")) << status;
}

// LARS needs whole-parameter norms from every shard: when the peer dies after
// the reduce-scatter, Step fails on the norms and changes no weight.
TEST(ZeroTest, LarsStepFailsCleanlyWhenTheNormsCannotBeGathered) {
  auto world = dist::InProcessWorld::Create(2, {"dp", absl::Seconds(30)});
  absl::Status step;
  std::vector<std::vector<float>> before, after;
  std::vector<absl::Status> statuses = testing::RunRanks(world, [&](dist::ProcessGroup& group) -> absl::Status {
    CpuBackend backend(CpuBackendConfig{1, DType::kF32});
    Grads grads(group.rank());
    ASSIGN_OR_RETURN(auto zero, ZeroOptimizer::Create(Config(optim::OptimizerKind::kLars), grads.list, group, backend));
    RETURN_IF_ERROR(zero->ReduceScatterGradients());
    if (group.rank() == 1) {
      world->Kill(1);
      return absl::OkStatus();
    }
    for (Parameter* p : grads.list) before.push_back(p->value.ToVector());
    step = zero->Step(0.1f, 1.0f);
    for (Parameter* p : grads.list) after.push_back(p->value.ToVector());
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(step.code(), absl::StatusCode::kUnavailable) << step;
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace ringmaster::engine::parallel
