#include "engine/optim/optimizer.h"

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "engine/optim/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::optim {
namespace {

using testing::MaxRelativeError;
using testing::RandomGrads;
using testing::ReferenceOptimizer;
using testing::StandardSpecs;
using testing::TestParams;

constexpr float kLossScale = 1024.0f;

OptimizerConfig Sgd(float momentum, bool nesterov, float wd) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kSgd;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = wd;
  return c;
}

OptimizerConfig AdamW(float wd) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdamW;
  c.beta1 = 0.9;
  c.beta2 = 0.95;
  c.weight_decay = wd;
  return c;
}

OptimizerConfig Lars(float momentum, float wd) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kLars;
  c.momentum = momentum;
  c.weight_decay = wd;
  c.trust_coefficient = 0.02f;
  return c;
}

OptimizerConfig Lamb(float wd) {
  OptimizerConfig c;
  c.kind = OptimizerKind::kLamb;
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-6f;
  c.weight_decay = wd;
  return c;
}

// A learning rate that changes every step, as under a schedule; base 0
// picks one that suits the kind.
float LrAt(const OptimizerConfig& c, int step, float base = 0.0f) {
  if (base == 0.0f) base = c.kind == OptimizerKind::kLars ? 2.0f : c.kind == OptimizerKind::kSgd ? 0.05f : 0.01f;
  return base * (1.0f + 0.25f * step);
}

std::vector<bool> DecayFlags(const TestParams& p) {
  std::vector<bool> out;
  for (size_t i = 0; i < p.size(); ++i) out.push_back(p[i].decay);
  return out;
}

struct NamedConfig {
  std::string name;
  OptimizerConfig config;
};

void PrintTo(const NamedConfig& c, std::ostream* os) { *os << c.name; }

class OptimizerReferenceTest : public ::testing::TestWithParam<NamedConfig> {};

// Six steps with grads stored times the loss scale and unscaled by Step,
// against the fp64 reference fed the true grads.
TEST_P(OptimizerReferenceTest, MatchesFp64ReferenceOverSteps) {
  const OptimizerConfig c = GetParam().config;
  TestParams params(StandardSpecs(), 11);
  ReferenceOptimizer ref(c, params.Values(), DecayFlags(params));
  auto opt = Optimizer::Create(c, params.list());
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::mt19937 rng(12);
  for (int step = 0; step < 6; ++step) {
    const auto grads = RandomGrads(params, rng, 0.5f);
    params.SetGrads(grads, kLossScale);
    ASSERT_TRUE((*opt)->Step(LrAt(c, step), 1.0f / kLossScale).ok());
    ref.Step(LrAt(c, step), grads, 1.0);
    EXPECT_LT(MaxRelativeError(params.Values(), ref.weights()), 1e-6) << "after step " << step + 1;
  }
  EXPECT_EQ((*opt)->step_count(), 6);
  // The update is not a no-op: the weights moved away from where they began.
  TestParams initial(StandardSpecs(), 11);
  EXPECT_GT(MaxRelativeError(params.Values(), initial.Values()), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, OptimizerReferenceTest,
                         ::testing::Values(NamedConfig{"SgdPlain", Sgd(0.0f, false, 0.01f)},
                                           NamedConfig{"SgdMomentum", Sgd(0.9f, false, 0.01f)},
                                           NamedConfig{"SgdNesterov", Sgd(0.9f, true, 0.05f)},
                                           NamedConfig{"AdamW", AdamW(0.1f)}, NamedConfig{"Lars", Lars(0.9f, 0.01f)},
                                           NamedConfig{"LarsNoMomentum", Lars(0.0f, 0.01f)},
                                           NamedConfig{"Lamb", Lamb(0.01f)}),
                         [](const ::testing::TestParamInfo<NamedConfig>& info) { return info.param.name; });

// Runs `steps` steps of `config` from seed-11 StandardSpecs parameters with
// seed-12 grads, stored times `loss_scale`; returns the weights.
std::vector<std::vector<double>> RunSteps(const OptimizerConfig& config, int steps, float loss_scale,
                                          float base_lr = 0.0f) {
  TestParams params(StandardSpecs(), 11);
  auto opt = Optimizer::Create(config, params.list());
  EXPECT_TRUE(opt.ok()) << opt.status();
  std::mt19937 rng(12);
  for (int step = 0; step < steps; ++step) {
    params.SetGrads(RandomGrads(params, rng, 0.5f), loss_scale);
    EXPECT_TRUE((*opt)->Step(LrAt(config, step, base_lr), 1.0f / loss_scale).ok());
  }
  return params.Values();
}

TEST(OptimizerTest, PowerOfTwoLossScaleGivesBitwiseTheUnscaledResult) {
  for (const OptimizerConfig& c : {Sgd(0.9f, true, 0.01f), AdamW(0.1f), Lars(0.9f, 0.01f), Lamb(0.01f)}) {
    EXPECT_EQ(RunSteps(c, 3, 65536.0f), RunSteps(c, 3, 1.0f)) << OptimizerKindName(c.kind);
    // Any other scale agrees to rounding.
    EXPECT_LT(MaxRelativeError(RunSteps(c, 3, 3.0f), RunSteps(c, 3, 1.0f)), 1e-6) << OptimizerKindName(c.kind);
  }
}

TEST(OptimizerTest, WeightDecaySkippedForExcludedParameters) {
  // StandardSpecs: index 1 ("layers.0.bias") has decay = false.
  for (auto make : {+[](float wd) { return Sgd(0.9f, false, wd); }, +[](float wd) { return AdamW(wd); },
                    +[](float wd) { return Lars(0.9f, wd); }, +[](float wd) { return Lamb(wd); }}) {
    const auto with_decay = RunSteps(make(0.3f), 3, 1.0f);
    const auto without = RunSteps(make(0.0f), 3, 1.0f);
    const char* kind = OptimizerKindName(make(0.0f).kind);
    EXPECT_EQ(with_decay[1], without[1]) << kind << ": the excluded bias must ignore weight_decay";
    EXPECT_NE(with_decay[0], without[0]) << kind << ": decayed weights must feel weight_decay";
  }
}

TEST(OptimizerTest, LarsExcludedParameterIsPlainSgdMomentum) {
  const auto lars = RunSteps(Lars(0.9f, 0.01f), 4, 1.0f, 0.05f);
  const auto sgd = RunSteps(Sgd(0.9f, false, 0.0f), 4, 1.0f, 0.05f);
  EXPECT_EQ(lars[1], sgd[1]);
  EXPECT_NE(lars[0], sgd[0]);
}

TEST(OptimizerTest, LambExcludedParameterIsBiasCorrectedAdam) {
  OptimizerConfig adam = AdamW(0.0f);
  adam.beta2 = 0.999;
  adam.eps = 1e-6f;
  const auto lamb = RunSteps(Lamb(0.01f), 4, 1.0f, 0.01f);
  const auto plain = RunSteps(adam, 4, 1.0f, 0.01f);
  EXPECT_LT(MaxRelativeError({lamb[1]}, {plain[1]}), 1e-6);
  EXPECT_GT(MaxRelativeError({lamb[0]}, {plain[0]}), 1e-4);
}

// One parameter w = [3, 4] with g = [0.8, -0.6] stored times 1024: the trust
// ratios must use the true gradient (values computed by hand in cpu_update_test).
TEST(OptimizerTest, TrustRatiosUseWholeParameterTrueGradientNorms) {
  struct Case {
    OptimizerConfig config;
    float lr;
    std::vector<double> want;
  };
  OptimizerConfig lars = Lars(0.9f, 0.01f);
  lars.trust_coefficient = 0.001f;
  for (const Case& c : {Case{lars, 1.0f, {2.996047619047619, 4.002666666666666}},
                        Case{Lamb(0.01f), 0.1f, {2.634236186677699, 4.340905900306711}}}) {
    TestParams params({{"w", {2}, true}}, 1);
    params[0].value.f32()[0] = 3.0f;
    params[0].value.f32()[1] = 4.0f;
    params.SetGrads({{0.8f, -0.6f}}, kLossScale);
    auto opt = Optimizer::Create(c.config, params.list());
    ASSERT_TRUE(opt.ok()) << opt.status();
    ASSERT_TRUE((*opt)->Step(c.lr, 1.0f / kLossScale).ok());
    EXPECT_NEAR(params[0].value.f32()[0], c.want[0], 2e-6) << OptimizerKindName(c.config.kind);
    EXPECT_NEAR(params[0].value.f32()[1], c.want[1], 2e-6) << OptimizerKindName(c.config.kind);
  }
}

// An in-process allreduce-sum over `ranks` threads (a fake ProcessGroup).
class FakeAllReduce {
 public:
  explicit FakeAllReduce(int ranks) : ranks_(ranks) {}
  absl::Status Reduce(std::vector<double>& v) {
    std::unique_lock<std::mutex> lock(mu_);
    ++calls_;
    const int64_t generation = generation_;
    if (arrived_ == 0) {
      sum_ = v;
    } else {
      for (size_t i = 0; i < v.size(); ++i) sum_[i] += v[i];
    }
    if (++arrived_ == ranks_) {
      result_ = sum_;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
    v = result_;
    return absl::OkStatus();
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  const int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0, calls_ = 0;
  int64_t generation_ = 0;
  std::vector<double> sum_, result_;
};

// Two ZeRO-1 ranks: rank 0 owns the first half of each parameter except
// "layers.1.weight", which rank 1 owns whole; rank 1 owns the rest.
std::vector<ShardSpec> TwoRankShards(const TestParams& params, FakeAllReduce* reduce) {
  std::vector<ShardSpec> shards(2);
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t n = params[i].value.numel();
    const int64_t half = params[i].name == "layers.1.weight" ? 0 : n / 2;
    shards[0].ranges.push_back({0, half});
    shards[1].ranges.push_back({half, n - half});
  }
  for (ShardSpec& s : shards) s.reduce_norms = [reduce](std::vector<double>& v) { return reduce->Reduce(v); };
  return shards;
}

TEST(OptimizerTest, TwoRankShardsMatchTheUnshardedOptimizer) {
  for (const OptimizerConfig& c : {Sgd(0.9f, true, 0.01f), AdamW(0.1f), Lars(0.9f, 0.01f), Lamb(0.01f)}) {
    const char* kind = OptimizerKindName(c.kind);
    TestParams params(StandardSpecs(), 11);
    FakeAllReduce reduce(2);
    std::vector<std::unique_ptr<Optimizer>> ranks;
    for (ShardSpec& s : TwoRankShards(params, &reduce)) {
      auto opt = Optimizer::Create(c, params.list(), std::move(s));
      ASSERT_TRUE(opt.ok()) << opt.status();
      ranks.push_back(std::move(*opt));
    }
    std::mt19937 rng(12);
    for (int step = 0; step < 4; ++step) {
      params.SetGrads(RandomGrads(params, rng, 0.5f), kLossScale);
      std::vector<std::thread> threads;
      for (auto& opt : ranks) {
        threads.emplace_back([&, o = opt.get()] { EXPECT_TRUE(o->Step(LrAt(c, step), 1.0f / kLossScale).ok()); });
      }
      for (auto& t : threads) t.join();
    }
    const auto whole = RunSteps(c, 4, kLossScale);
    const bool needs_norms = c.kind == OptimizerKind::kLars || c.kind == OptimizerKind::kLamb;
    if (needs_norms) {
      // Norms summed in another order: equal to rounding.
      EXPECT_LT(MaxRelativeError(params.Values(), whole), 1e-6) << kind;
      EXPECT_EQ(reduce.calls(), 2 * 4) << kind << ": one reduction per rank per step";
    } else {
      EXPECT_EQ(params.Values(), whole) << kind << ": element-wise updates are bitwise the same";
      EXPECT_EQ(reduce.calls(), 0) << kind;
    }
    // The shards split the state between them.
    auto unsharded = Optimizer::Create(c, params.list());
    ASSERT_TRUE(unsharded.ok());
    EXPECT_EQ(ranks[0]->StateBytes() + ranks[1]->StateBytes(), (*unsharded)->StateBytes()) << kind;
  }
}

TEST(OptimizerTest, ReducerErrorIsReturnedAndNothingChanges) {
  for (const OptimizerConfig& c : {Lars(0.9f, 0.01f), Lamb(0.01f)}) {
    TestParams params(StandardSpecs(), 11);
    std::mt19937 rng(12);
    params.SetGrads(RandomGrads(params, rng, 0.5f), 1.0f);
    ShardSpec shard;
    for (size_t i = 0; i < params.size(); ++i) shard.ranges.push_back({0, params[i].value.numel()});
    shard.reduce_norms = [](std::vector<double>&) { return absl::UnavailableError("peer 3 lost"); };
    auto opt = Optimizer::Create(c, params.list(), std::move(shard));
    ASSERT_TRUE(opt.ok()) << opt.status();
    const auto before = params.Values();
    const absl::Status s = (*opt)->Step(0.1f, 1.0f);
    EXPECT_EQ(s, absl::UnavailableError("peer 3 lost"));
    EXPECT_EQ(params.Values(), before);
    EXPECT_EQ((*opt)->step_count(), 0);
    for (const auto& [name, t] : (*opt)->StateTensors()) {
      for (float x : t.ToVector()) ASSERT_EQ(x, 0.0f) << name;
    }
  }
}

TEST(OptimizerTest, StepRejectsBadLearningRateAndGradScale) {
  TestParams params(StandardSpecs(), 11);
  std::mt19937 rng(12);
  params.SetGrads(RandomGrads(params, rng, 0.5f), 1.0f);
  auto opt = Optimizer::Create(AdamW(0.1f), params.list());
  ASSERT_TRUE(opt.ok());
  const auto before = params.Values();
  EXPECT_EQ((*opt)->Step(NAN, 1.0f), absl::InvalidArgumentError("learning rate must be finite and >= 0, got nan"));
  EXPECT_EQ((*opt)->Step(-0.5f, 1.0f), absl::InvalidArgumentError("learning rate must be finite and >= 0, got -0.5"));
  EXPECT_EQ((*opt)->Step(0.1f, 0.0f), absl::InvalidArgumentError("grad_scale must be finite and > 0, got 0"));
  EXPECT_EQ((*opt)->Step(0.1f, INFINITY), absl::InvalidArgumentError("grad_scale must be finite and > 0, got inf"));
  EXPECT_EQ(params.Values(), before);
  EXPECT_EQ((*opt)->step_count(), 0);
}

TEST(OptimizerTest, ZeroGradZeroesEveryGradient) {
  TestParams params(StandardSpecs(), 11);
  std::mt19937 rng(12);
  params.SetGrads(RandomGrads(params, rng, 0.5f), 1.0f);
  auto opt = Optimizer::Create(Sgd(0.9f, false, 0.0f), params.list());
  ASSERT_TRUE(opt.ok());
  (*opt)->ZeroGrad();
  for (size_t i = 0; i < params.size(); ++i) {
    for (float g : params[i].grad.ToVector()) ASSERT_EQ(g, 0.0f) << params[i].name;
  }
}

TEST(OptimizerCreateTest, RejectsBadConfigsWithTheField) {
  TestParams params(StandardSpecs(), 11);
  auto error = [&](const OptimizerConfig& c) { return Optimizer::Create(c, params.list()).status(); };
  OptimizerConfig c = Sgd(1.0f, false, 0.0f);
  EXPECT_EQ(error(c), absl::InvalidArgumentError("optimizer momentum must be in [0, 1), got 1"));
  c = Sgd(0.0f, true, 0.0f);
  EXPECT_EQ(error(c), absl::InvalidArgumentError("optimizer nesterov needs kind sgd and momentum > 0"));
  c = Sgd(0.9f, false, -0.1f);
  EXPECT_EQ(error(c), absl::InvalidArgumentError("optimizer weight_decay must be finite and >= 0, got -0.1"));
  c = AdamW(0.0f);
  c.beta2 = 1.0;
  EXPECT_EQ(error(c), absl::InvalidArgumentError("optimizer beta2 must be in [0, 1), got 1"));
  c = Lamb(0.0f);
  c.eps = 0.0f;
  EXPECT_EQ(error(c), absl::InvalidArgumentError("optimizer eps must be finite and > 0, got 0"));
  c = Lars(0.9f, 0.0f);
  c.trust_coefficient = 0.0f;
  EXPECT_EQ(error(c), absl::InvalidArgumentError("optimizer trust_coefficient must be finite and > 0, got 0"));
  c = Lars(0.9f, 0.0f);
  c.nesterov = true;
  EXPECT_EQ(error(c), absl::InvalidArgumentError("optimizer nesterov needs kind sgd and momentum > 0"));
}

TEST(OptimizerCreateTest, RejectsBadParametersWithTheName) {
  TestParams params(StandardSpecs(), 11);
  const OptimizerConfig c = AdamW(0.0f);
  ParameterList list = params.list();
  list.push_back(nullptr);
  EXPECT_EQ(Optimizer::Create(c, list).status(), absl::InvalidArgumentError("parameter 4 is null"));
  list = params.list();
  list.push_back(list[0]);
  EXPECT_EQ(Optimizer::Create(c, list).status(),
            absl::InvalidArgumentError("duplicate parameter name \"layers.0.weight\""));

  Parameter p{"odd", Tensor::Zeros({2, 3}), Tensor::Zeros({3, 2}), true};
  EXPECT_EQ(Optimizer::Create(c, {&p}).status(),
            absl::InvalidArgumentError("parameter \"odd\" grad has shape [3, 2], value has [2, 3]"));
  p.grad = Tensor::Zeros({2, 3}, DType::kBF16);
  EXPECT_EQ(Optimizer::Create(c, {&p}).status(),
            absl::InvalidArgumentError(
                "parameter \"odd\" grad must be a host f32 tensor like its value, got cpu bf16"));
  float device_memory[6];
  p.value = Tensor::Wrap(device_memory, {2, 3}, DType::kF32, Device::kCuda);
  p.grad = Tensor::Zeros({2, 3});
  EXPECT_EQ(Optimizer::Create(c, {&p}).status(),
            absl::InvalidArgumentError("parameter \"odd\" grad must be a cuda f32 tensor like its value, got cpu f32"));
  Parameter host{"host", Tensor::Zeros({2}), Tensor::Zeros({2}), true};
  EXPECT_EQ(Optimizer::Create(c, {&host, &p}).status(),
            absl::InvalidArgumentError(
                "parameter \"odd\" value must be a host f32 tensor like the first parameter's, got cuda f32"));
  p.value = Tensor::Zeros({2, 3});
  p.grad = Tensor();
  EXPECT_EQ(Optimizer::Create(c, {&p}).status(), absl::InvalidArgumentError("parameter \"odd\" has no grad tensor"));
}

#if !RINGMASTER_TEST_HAVE_CUDA
TEST(OptimizerCreateTest, CudaParametersNeedACudaBuild) {
  float value[6], grad[6];
  Parameter p{"w", Tensor::Wrap(value, {2, 3}, DType::kF32, Device::kCuda),
              Tensor::Wrap(grad, {2, 3}, DType::kF32, Device::kCuda), true};
  EXPECT_EQ(Optimizer::Create(AdamW(0.0f), {&p}).status(),
            absl::FailedPreconditionError(
                "the optimizer's parameters are CUDA tensors, but this binary was built without CUDA"));
}
#endif

TEST(OptimizerCreateTest, RejectsBadShards) {
  TestParams params(StandardSpecs(), 11);
  ShardSpec shard;
  shard.ranges = {{0, 144}, {0, 16}, {0, 21}};
  EXPECT_EQ(Optimizer::Create(AdamW(0.0f), params.list(), shard).status(),
            absl::InvalidArgumentError("shard has 3 ranges for 4 parameters"));
  shard.ranges = {{0, 144}, {10, 7}, {0, 21}, {0, 37}};
  EXPECT_EQ(Optimizer::Create(AdamW(0.0f), params.list(), shard).status(),
            absl::InvalidArgumentError("shard range [10, +7) is outside parameter \"layers.0.bias\" of 16 elements"));
  shard.ranges = {{0, 144}, {0, 16}, {0, 21}, {0, 37}};
  EXPECT_EQ(Optimizer::Create(Lamb(0.0f), params.list(), shard).status(),
            absl::InvalidArgumentError("a sharded lamb optimizer needs ShardSpec::reduce_norms"));
  EXPECT_TRUE(Optimizer::Create(AdamW(0.0f), params.list(), shard).ok());
}

TEST(OptimizerKindTest, ParsesNamesAndRejectsOthers) {
  for (OptimizerKind k : {OptimizerKind::kSgd, OptimizerKind::kAdamW, OptimizerKind::kLars, OptimizerKind::kLamb}) {
    auto parsed = ParseOptimizerKind(OptimizerKindName(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_EQ(ParseOptimizerKind("adam").status(),
            absl::InvalidArgumentError("unknown optimizer \"adam\"; expected sgd, adamw, lars or lamb"));
}

}  // namespace
}  // namespace ringmaster::engine::optim
