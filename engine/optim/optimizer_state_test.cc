// Optimizer state for checkpoints: names, shapes, bytes, round trip, and the
// exact errors of LoadState.

#include <random>

#include "engine/optim/optimizer.h"
#include "engine/optim/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::optim {
namespace {

using testing::RandomGrads;
using testing::StandardSpecs;
using testing::TestParams;

OptimizerConfig Config(OptimizerKind kind, float momentum = 0.9f) {
  OptimizerConfig c;
  c.kind = kind;
  c.momentum = momentum;
  c.weight_decay = 0.01f;
  return c;
}

std::vector<std::pair<std::string, Shape>> NamesAndShapes(const NamedTensors& tensors) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.shape());
  return out;
}

// Deep copies, as a checkpoint writer would take.
NamedTensors Copy(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, Tensor::FromVector(t.shape(), t.ToVector()));
  return out;
}

TEST(OptimizerStateTest, NamesShapesAndBytesPerKind) {
  TestParams params(StandardSpecs(), 1);
  // StandardSpecs: layers.0.weight [16, 9], layers.0.bias [16], layers.1.weight [3, 7], head.weight [37].
  const int64_t numel = 144 + 16 + 21 + 37;
  using Expected = std::vector<std::pair<std::string, Shape>>;
  const Expected momentum = {{"momentum_buffer.layers.0.weight", {16, 9}},
                             {"momentum_buffer.layers.0.bias", {16}},
                             {"momentum_buffer.layers.1.weight", {3, 7}},
                             {"momentum_buffer.head.weight", {37}}};
  const Expected adam = {{"exp_avg.layers.0.weight", {16, 9}}, {"exp_avg_sq.layers.0.weight", {16, 9}},
                         {"exp_avg.layers.0.bias", {16}},      {"exp_avg_sq.layers.0.bias", {16}},
                         {"exp_avg.layers.1.weight", {3, 7}},  {"exp_avg_sq.layers.1.weight", {3, 7}},
                         {"exp_avg.head.weight", {37}},        {"exp_avg_sq.head.weight", {37}}};
  struct Case {
    OptimizerConfig config;
    Expected names;
  };
  for (const Case& c : {Case{Config(OptimizerKind::kSgd), momentum}, Case{Config(OptimizerKind::kSgd, 0.0f), {}},
                        Case{Config(OptimizerKind::kLars), momentum}, Case{Config(OptimizerKind::kAdamW), adam},
                        Case{Config(OptimizerKind::kLamb), adam}}) {
    auto opt = Optimizer::Create(c.config, params.list());
    ASSERT_TRUE(opt.ok()) << opt.status();
    EXPECT_EQ(NamesAndShapes((*opt)->StateTensors()), c.names) << OptimizerKindName(c.config.kind);
    const size_t slots = c.names.size() / params.size();
    EXPECT_EQ((*opt)->StateBytes(), slots * numel * sizeof(float)) << OptimizerKindName(c.config.kind);
  }
}

TEST(OptimizerStateTest, ShardStateIsFlatAndOmitsEmptyRanges) {
  TestParams params(StandardSpecs(), 1);
  ShardSpec shard;
  shard.ranges = {{100, 44}, {0, 16}, {0, 0}, {5, 10}};
  auto opt = Optimizer::Create(Config(OptimizerKind::kAdamW), params.list(), shard);
  ASSERT_TRUE(opt.ok()) << opt.status();
  const std::vector<std::pair<std::string, Shape>> want = {
      {"exp_avg.layers.0.weight", {44}},  {"exp_avg_sq.layers.0.weight", {44}}, {"exp_avg.layers.0.bias", {16}},
      {"exp_avg_sq.layers.0.bias", {16}}, {"exp_avg.head.weight", {10}},        {"exp_avg_sq.head.weight", {10}}};
  EXPECT_EQ(NamesAndShapes((*opt)->StateTensors()), want);
  EXPECT_EQ((*opt)->StateBytes(), 2 * (44 + 16 + 10) * sizeof(float));
}

// 3 steps, checkpoint, 2 more steps in a fresh optimizer (over a copy of the
// parameters) equals 5 uninterrupted steps, bitwise.
TEST(OptimizerStateTest, RoundTripResumesBitwise) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW, OptimizerKind::kLars, OptimizerKind::kLamb}) {
    const OptimizerConfig c = Config(kind);
    const float lr = kind == OptimizerKind::kLars ? 1.0f : 0.01f;
    TestParams params(StandardSpecs(), 1);
    auto opt = Optimizer::Create(c, params.list());
    ASSERT_TRUE(opt.ok()) << opt.status();
    std::mt19937 rng(2);
    std::vector<std::vector<std::vector<float>>> grads;
    for (int i = 0; i < 5; ++i) grads.push_back(RandomGrads(params, rng, 1.0f));

    std::unique_ptr<TestParams> resumed_params;
    NamedTensors saved;
    for (int step = 0; step < 5; ++step) {
      if (step == 3) {
        resumed_params = params.Clone();
        saved = Copy((*opt)->StateTensors());
      }
      params.SetGrads(grads[step], 1.0f);
      ASSERT_TRUE((*opt)->Step(lr, 1.0f).ok());
    }
    auto resumed = Optimizer::Create(c, resumed_params->list());
    ASSERT_TRUE(resumed.ok());
    ASSERT_TRUE((*resumed)->LoadState(saved, 3).ok());
    EXPECT_EQ((*resumed)->step_count(), 3);
    for (int step = 3; step < 5; ++step) {
      resumed_params->SetGrads(grads[step], 1.0f);
      ASSERT_TRUE((*resumed)->Step(lr, 1.0f).ok());
    }
    EXPECT_EQ(resumed_params->Values(), params.Values()) << OptimizerKindName(kind);
    EXPECT_EQ((*resumed)->step_count(), 5);
    for (size_t i = 0; i < saved.size(); ++i) {
      EXPECT_EQ((*resumed)->StateTensors()[i].second.ToVector(), (*opt)->StateTensors()[i].second.ToVector())
          << saved[i].first;
    }
  }
}

// A checkpoint's snapshot: the state copied into the caller's buffers, named
// and shaped as StateTensors names them, equal to it, reused when the caller
// hands the same buffers again, and left as it was by the next Step.
TEST(OptimizerStateTest, CopyStateTensorsFillsTheCallersBuffers) {
  TestParams params(StandardSpecs(), 1);
  auto opt = Optimizer::Create(Config(OptimizerKind::kAdamW), params.list());
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::mt19937 rng(3);
  params.SetGrads(RandomGrads(params, rng, 1.0f), 1.0f);
  ASSERT_TRUE((*opt)->Step(0.01f, 1.0f).ok());

  std::vector<Tensor> buffers;
  size_t slot = 0;
  auto buffer = [&](const Tensor& like) {
    if (buffers.size() <= slot) buffers.push_back(Tensor::Empty(like.shape()));
    return buffers[slot++];
  };
  const NamedTensors copy = (*opt)->CopyStateTensors(buffer);
  const NamedTensors live = (*opt)->StateTensors();
  ASSERT_EQ(NamesAndShapes(copy), NamesAndShapes(live));
  ASSERT_EQ(buffers.size(), copy.size());
  for (size_t i = 0; i < copy.size(); ++i) {
    EXPECT_EQ(copy[i].second.raw(), buffers[i].raw()) << copy[i].first;
    EXPECT_NE(copy[i].second.raw(), live[i].second.raw()) << copy[i].first << ": the live state, not a copy";
    EXPECT_EQ(copy[i].second.ToVector(), live[i].second.ToVector()) << copy[i].first;
  }
  const NamedTensors before = Copy(copy);
  params.SetGrads(RandomGrads(params, rng, 1.0f), 1.0f);
  ASSERT_TRUE((*opt)->Step(0.01f, 1.0f).ok());
  for (size_t i = 0; i < copy.size(); ++i) {
    EXPECT_EQ(copy[i].second.ToVector(), before[i].second.ToVector()) << copy[i].first << " changed with the step";
    EXPECT_NE(live[i].second.ToVector(), before[i].second.ToVector()) << copy[i].first << " did not step";
  }
  slot = 0;  // the same buffers again
  const NamedTensors again = (*opt)->CopyStateTensors(buffer);
  ASSERT_EQ(buffers.size(), copy.size());
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].second.raw(), buffers[i].raw()) << again[i].first;
    EXPECT_EQ(again[i].second.ToVector(), live[i].second.ToVector()) << again[i].first;
  }
}

class LoadStateErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opt = Optimizer::Create(Config(OptimizerKind::kAdamW), params_.list());
    ASSERT_TRUE(opt.ok());
    opt_ = std::move(*opt);
    std::mt19937 rng(2);
    params_.SetGrads(RandomGrads(params_, rng, 1.0f), 1.0f);
    ASSERT_TRUE(opt_->Step(0.01f, 1.0f).ok());
    // Valid state whose values differ from the live state, so a load that
    // copied some tensors before failing would show.
    good_ = Copy(opt_->StateTensors());
    for (auto& [name, t] : good_) {
      for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = 42.0f + i;
    }
  }

  // The error, after checking that the failed load changed nothing.
  absl::Status Load(const NamedTensors& tensors, int64_t step = 7) {
    const NamedTensors before = Copy(opt_->StateTensors());
    absl::Status s = opt_->LoadState(tensors, step);
    if (!s.ok()) {
      EXPECT_EQ(opt_->step_count(), 1);
      for (size_t i = 0; i < before.size(); ++i) {
        EXPECT_EQ(opt_->StateTensors()[i].second.ToVector(), before[i].second.ToVector()) << before[i].first;
      }
    }
    return s;
  }

  TestParams params_{StandardSpecs(), 1};
  std::unique_ptr<Optimizer> opt_;
  NamedTensors good_;
};

TEST_F(LoadStateErrorTest, AcceptsItsOwnStateInAnyOrder) {
  NamedTensors reversed(good_.rbegin(), good_.rend());
  EXPECT_TRUE(Load(reversed).ok());
  EXPECT_EQ(opt_->step_count(), 7);
  for (const auto& [name, t] : opt_->StateTensors()) {
    ASSERT_EQ(t.f32()[0], 42.0f) << name;
    ASSERT_EQ(t.f32()[t.numel() - 1], 42.0f + t.numel() - 1) << name;
  }
}

TEST_F(LoadStateErrorTest, WrongShape) {
  NamedTensors bad = good_;
  bad[0].second = Tensor::Zeros({9, 16});
  EXPECT_EQ(Load(bad), absl::InvalidArgumentError(
                           "optimizer state \"exp_avg.layers.0.weight\" has shape [9, 16], expected [16, 9]"));
}

TEST_F(LoadStateErrorTest, MissingName) {
  NamedTensors bad = good_;
  bad.erase(bad.begin() + 3);
  EXPECT_EQ(Load(bad), absl::InvalidArgumentError("missing optimizer state \"exp_avg_sq.layers.0.bias\""));
}

TEST_F(LoadStateErrorTest, UnexpectedName) {
  NamedTensors bad = good_;
  bad[5].first = "exp_avg_sq.layers.2.weight";
  EXPECT_EQ(Load(bad), absl::InvalidArgumentError("unexpected optimizer state \"exp_avg_sq.layers.2.weight\""));
  // Another optimizer's state does not fit either.
  bad = good_;
  bad[0].first = "momentum_buffer.layers.0.weight";
  EXPECT_EQ(Load(bad), absl::InvalidArgumentError("unexpected optimizer state \"momentum_buffer.layers.0.weight\""));
}

TEST_F(LoadStateErrorTest, DuplicateName) {
  NamedTensors bad = good_;
  bad.push_back(good_[2]);
  EXPECT_EQ(Load(bad), absl::InvalidArgumentError("duplicate optimizer state \"exp_avg.layers.0.bias\""));
}

TEST_F(LoadStateErrorTest, WrongDtype) {
  NamedTensors bad = good_;
  bad[1].second = Tensor::Zeros({16, 9}, DType::kF16);
  EXPECT_EQ(Load(bad), absl::InvalidArgumentError(
                           "optimizer state \"exp_avg_sq.layers.0.weight\" must be a host f32 tensor, got cpu f16"));
}

TEST_F(LoadStateErrorTest, NegativeStepCount) {
  EXPECT_EQ(Load(good_, -1), absl::InvalidArgumentError("optimizer step count must be >= 0, got -1"));
}

}  // namespace
}  // namespace ringmaster::engine::optim
