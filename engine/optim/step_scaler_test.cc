#include "engine/optim/step_scaler.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/optim/grad_norm.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::optim {
namespace {

LossScalerConfig Fp16() {
  LossScalerConfig c;
  c.initial_scale = 1024.0f;
  c.growth_interval = 2;
  return c;
}

std::unique_ptr<HostStepScaler> Make(const LossScalerConfig& config, std::vector<Tensor> grads) {
  auto s = HostStepScaler::Create(config, std::move(grads));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// The first half of a step as the trainer runs it on one rank.
void Prologue(StepScaler& s, const std::vector<Tensor>& grads, float max_norm) {
  for (const Tensor& g : grads) {
    for (int64_t i = 0; i < g.numel(); ++i) {
      if (!std::isfinite(g.f32()[i])) s.flag().f32()[0] = 1.0f;  // what NonFiniteCheck does
    }
  }
  ASSERT_TRUE(s.Prologue(max_norm).ok());
}

TEST(HostStepScalerTest, CleanStepAppliesTheUnscaledClippedGradient) {
  // Stored grads are the true grads times the scale 1024: true norm 5.
  Tensor g = Tensor::FromVector({2}, {3.0f * 1024, 4.0f * 1024});
  auto s = Make(Fp16(), {g});
  Prologue(*s, {g}, /*max_norm=*/1.0f);
  const OptimizerUpdate u = s->Update();
  EXPECT_TRUE(u.apply);
  EXPECT_FLOAT_EQ(u.grad_scale, ClipCoefficient(5.0, 1.0f) / 1024.0f);
  ASSERT_TRUE(s->Epilogue().ok());
  const StepSnapshot snap = s->Snapshot();
  EXPECT_FALSE(snap.skipped);
  EXPECT_DOUBLE_EQ(snap.grad_norm, 5.0);
  EXPECT_EQ(snap.optimizer_steps, 1);
  EXPECT_EQ(snap.scaler.scale, 1024.0f);
  EXPECT_EQ(snap.scaler.clean_steps, 1);
}

TEST(HostStepScalerTest, OverflowSkipsHalvesAndClearsTheFlag) {
  Tensor g = Tensor::FromVector({2}, {std::numeric_limits<float>::infinity(), 1.0f});
  auto s = Make(Fp16(), {g});
  Prologue(*s, {g}, 0.0f);
  EXPECT_FALSE(s->Update().apply);
  ASSERT_TRUE(s->Epilogue().ok());
  StepSnapshot snap = s->Snapshot();
  EXPECT_TRUE(snap.skipped);
  EXPECT_EQ(snap.grad_norm, 0.0);
  EXPECT_EQ(snap.optimizer_steps, 0);
  EXPECT_EQ(snap.scaler.scale, 512.0f);
  EXPECT_EQ(snap.scaler.skipped_steps, 1);
  EXPECT_EQ(s->flag().f32()[0], 0.0f);

  // Two clean steps grow the scale back (growth_interval 2).
  g.f32()[0] = 1.0f;
  for (int i = 0; i < 2; ++i) {
    Prologue(*s, {g}, 0.0f);
    EXPECT_TRUE(s->Update().apply);
    ASSERT_TRUE(s->Epilogue().ok());
  }
  snap = s->Snapshot();
  EXPECT_EQ(snap.scaler.scale, 1024.0f);
  EXPECT_EQ(snap.optimizer_steps, 2);
}

TEST(HostStepScalerTest, ANonFiniteSumSkipsEvenWithoutTheFlag) {
  // Finite grads whose squares overflow fp64 cannot happen in f32, but a NaN
  // the flag missed (another rank's) shows in the summed norm.
  Tensor g = Tensor::FromVector({1}, {std::nanf("")});
  auto s = Make(Fp16(), {g});
  ASSERT_TRUE(s->Prologue(0.0f).ok());
  EXPECT_FALSE(s->Update().apply);
}

TEST(HostStepScalerTest, DisabledNeverSkips) {
  LossScalerConfig c;
  c.enabled = false;
  Tensor g = Tensor::FromVector({1}, {std::numeric_limits<float>::infinity()});
  auto s = Make(c, {g});
  Prologue(*s, {g}, 0.0f);
  EXPECT_TRUE(s->Update().apply);
  ASSERT_TRUE(s->Epilogue().ok());
  EXPECT_EQ(s->Snapshot().scaler.scale, 1.0f);
  EXPECT_EQ(s->Snapshot().scaler.skipped_steps, 0);
}

TEST(HostStepScalerTest, SumsSquaresOverRanksInRankOrder) {
  // Three ranks holding parts with sums of squares 1, 4 and 20 (norm 5).
  const std::vector<double> parts = {1.0, 4.0, 20.0};
  std::vector<std::unique_ptr<HostStepScaler>> ranks;
  std::vector<Tensor> grads = {Tensor::FromVector({1}, {1.0f}), Tensor::FromVector({1}, {2.0f}),
                               Tensor::FromVector({2}, {2.0f, 4.0f})};
  LossScalerConfig c;
  c.enabled = false;
  for (const Tensor& g : grads) ranks.push_back(Make(c, {g}));
  for (auto& r : ranks) ASSERT_TRUE(r->LocalSumSquares().ok());
  auto all_gather = [&](const Tensor& in, const Tensor& out) {
    EXPECT_EQ(in.numel(), 2);
    EXPECT_EQ(out.numel(), 6);
    for (int r = 0; r < 3; ++r) std::memcpy(static_cast<char*>(out.raw()) + r * 8, &parts[r], 8);
    return absl::OkStatus();
  };
  for (auto& r : ranks) {
    ASSERT_TRUE(r->SumSquaresOverRanks(3, all_gather).ok());
    ASSERT_TRUE(r->Decide(0.0f).ok());
    ASSERT_TRUE(r->Epilogue().ok());
    EXPECT_DOUBLE_EQ(r->Snapshot().grad_norm, 5.0);
  }
  EXPECT_FALSE(ranks[0]->SumSquaresOverRanks(0, all_gather).ok());
}

TEST(HostStepScalerTest, LoadStateRestoresOrRejects) {
  auto s = Make(Fp16(), {Tensor::Zeros({1})});
  ASSERT_TRUE(s->LoadState({256.0f, 3, 7}, 42).ok());
  EXPECT_EQ(s->scale(), 256.0f);
  EXPECT_EQ(s->Snapshot().optimizer_steps, 42);
  EXPECT_EQ(s->Snapshot().scaler.skipped_steps, 7);
  EXPECT_EQ(s->LoadState({256.0f, 0, 0}, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->LoadState({std::nanf(""), 0, 0}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->scale(), 256.0f);  // unchanged
}

TEST(HostStepScalerTest, RejectsABadConfigOrGrad) {
  LossScalerConfig bad = Fp16();
  bad.growth_factor = 0.5f;
  EXPECT_EQ(HostStepScaler::Create(bad, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostStepScaler::Create(Fp16(), {Tensor()}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostStepScaler::Create(Fp16(), {Tensor::Zeros({1}, DType::kI32)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::engine::optim
