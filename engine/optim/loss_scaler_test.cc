#include "engine/optim/loss_scaler.h"

#include "gtest/gtest.h"

namespace ringmaster::engine::optim {
namespace {

LossScalerConfig Small() {
  LossScalerConfig c;
  c.initial_scale = 1024.0f;
  c.growth_interval = 3;
  c.min_scale = 1.0f;
  c.max_scale = 65536.0f;
  return c;
}

LossScaler Make(const LossScalerConfig& c) {
  auto s = LossScaler::Create(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LossScalerTest, DefaultsAreTheArchitecture) {
  const LossScaler s = Make(LossScalerConfig());
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.inverse_scale(), 1.0f / 65536.0f);
  const LossScalerConfig c;
  EXPECT_EQ(c.growth_factor, 2.0f);
  EXPECT_EQ(c.backoff_factor, 0.5f);
  EXPECT_EQ(c.growth_interval, 2000);
}

TEST(LossScalerTest, OverflowSkipsTheStepAndHalvesTheScale) {
  LossScaler s = Make(Small());
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 256.0f);
  EXPECT_EQ(s.skipped_steps(), 2);
  EXPECT_FALSE(s.Update(false));
  EXPECT_EQ(s.scale(), 256.0f);
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(LossScalerTest, GrowsAfterIntervalOfCleanSteps) {
  LossScaler s = Make(Small());  // interval 3
  EXPECT_FALSE(s.Update(false));
  EXPECT_FALSE(s.Update(false));
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.clean_steps(), 2);
  EXPECT_FALSE(s.Update(false));  // third clean step
  EXPECT_EQ(s.scale(), 2048.0f);
  EXPECT_EQ(s.clean_steps(), 0);
  for (int i = 0; i < 3; ++i) s.Update(false);
  EXPECT_EQ(s.scale(), 4096.0f);
}

TEST(LossScalerTest, OverflowResetsTheCleanCounter) {
  LossScaler s = Make(Small());
  s.Update(false);
  s.Update(false);  // one short of growing
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.clean_steps(), 0);
  EXPECT_EQ(s.scale(), 512.0f);
  s.Update(false);
  s.Update(false);
  EXPECT_EQ(s.scale(), 512.0f) << "growth needs 3 clean steps after the overflow";
  s.Update(false);
  EXPECT_EQ(s.scale(), 1024.0f);
}

TEST(LossScalerTest, MinimumFloorStillSkips) {
  LossScalerConfig c = Small();
  c.initial_scale = 4.0f;
  c.min_scale = 2.0f;
  LossScaler s = Make(c);
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 2.0f);
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 2.0f);  // floor
  EXPECT_EQ(s.skipped_steps(), 2);
}

TEST(LossScalerTest, MaximumCap) {
  LossScalerConfig c = Small();
  c.initial_scale = 32768.0f;
  c.growth_interval = 1;
  LossScaler s = Make(c);
  s.Update(false);
  EXPECT_EQ(s.scale(), 65536.0f);
  s.Update(false);
  EXPECT_EQ(s.scale(), 65536.0f);
}

TEST(LossScalerTest, DisabledIsScaleOneAndNeverSkips) {
  LossScalerConfig c = Small();
  c.enabled = false;
  for (LossScaler s : {LossScaler::Disabled(), Make(c)}) {
    EXPECT_FALSE(s.enabled());
    EXPECT_EQ(s.scale(), 1.0f);
    EXPECT_EQ(s.inverse_scale(), 1.0f);
    EXPECT_FALSE(s.Update(true));
    for (int i = 0; i < 10; ++i) EXPECT_FALSE(s.Update(false));
    EXPECT_EQ(s.scale(), 1.0f);
    EXPECT_EQ(s.skipped_steps(), 0);
  }
}

TEST(LossScalerTest, StateRoundTrip) {
  LossScaler s = Make(Small());
  s.Update(true);
  s.Update(false);
  s.Update(false);
  const LossScalerState saved = s.State();
  EXPECT_EQ(saved.scale, 512.0f);
  EXPECT_EQ(saved.clean_steps, 2);
  EXPECT_EQ(saved.skipped_steps, 1);

  LossScaler resumed = Make(Small());
  ASSERT_TRUE(resumed.LoadState(saved).ok());
  // Both continue identically: the next clean step grows.
  for (bool overflow : {false, false, true, false}) {
    EXPECT_EQ(resumed.Update(overflow), s.Update(overflow));
    EXPECT_EQ(resumed.scale(), s.scale());
    EXPECT_EQ(resumed.clean_steps(), s.clean_steps());
    EXPECT_EQ(resumed.skipped_steps(), s.skipped_steps());
  }
  EXPECT_EQ(resumed.scale(), 512.0f);  // 512 -> 1024 -> (1024) -> 512 -> 512
}

TEST(LossScalerTest, LoadStateRejectsBadValues) {
  LossScaler s = Make(Small());
  EXPECT_EQ(s.LoadState({0.5f, 0, 0}), absl::InvalidArgumentError("loss scale must be in [1, 65536], got 0.5"));
  EXPECT_EQ(s.LoadState({INFINITY, 0, 0}), absl::InvalidArgumentError("loss scale must be in [1, 65536], got inf"));
  EXPECT_EQ(s.LoadState({8.0f, -1, 0}),
            absl::InvalidArgumentError("loss scaler counts must be >= 0, got clean_steps -1 and skipped_steps 0"));
  EXPECT_EQ(s.scale(), 1024.0f);
  LossScaler off = LossScaler::Disabled();
  EXPECT_EQ(
      off.LoadState({8.0f, 0, 0}),
      absl::InvalidArgumentError(
          "a disabled loss scaler takes only scale 1 and zero counts, got scale 8, clean_steps 0, skipped_steps 0"));
  EXPECT_TRUE(off.LoadState({1.0f, 0, 0}).ok());
}

TEST(LossScalerTest, CreateRejectsBadConfig) {
  LossScalerConfig c = Small();
  c.growth_factor = 1.0f;
  EXPECT_EQ(LossScaler::Create(c).status(),
            absl::InvalidArgumentError("loss scaler growth_factor must be finite and > 1, got 1"));
  c = Small();
  c.backoff_factor = 1.0f;
  EXPECT_EQ(LossScaler::Create(c).status(),
            absl::InvalidArgumentError("loss scaler backoff_factor must be in (0, 1), got 1"));
  c = Small();
  c.growth_interval = 0;
  EXPECT_EQ(LossScaler::Create(c).status(),
            absl::InvalidArgumentError("loss scaler growth_interval must be > 0, got 0"));
  c = Small();
  c.initial_scale = 0.5f;
  EXPECT_EQ(LossScaler::Create(c).status(),
            absl::InvalidArgumentError("loss scaler initial_scale must be in [1, 65536], got 0.5"));
  c = Small();
  c.min_scale = 0.0f;
  EXPECT_EQ(LossScaler::Create(c).status(),
            absl::InvalidArgumentError("loss scaler min_scale must be finite and > 0, got 0"));
}

}  // namespace
}  // namespace ringmaster::engine::optim
