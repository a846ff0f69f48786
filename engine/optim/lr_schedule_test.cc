#include "engine/optim/lr_schedule.h"

#include "gtest/gtest.h"

namespace ringmaster::engine::optim {
namespace {

constexpr double kTol = 1e-6;

LrSchedule Make(const LrScheduleConfig& c) {
  auto s = LrSchedule::Create(c);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

TEST(LrScheduleTest, ConstantWithoutWarmup) {
  LrScheduleConfig c;
  c.base_lr = 0.1f;
  const LrSchedule s = Make(c);
  EXPECT_FLOAT_EQ(s.LearningRate(0), 0.1f);
  EXPECT_FLOAT_EQ(s.LearningRate(1000000), 0.1f);
}

TEST(LrScheduleTest, LinearWarmupReachesBaseAtItsLastStep) {
  LrScheduleConfig c;
  c.base_lr = 0.1f;
  c.warmup_steps = 10;
  const LrSchedule s = Make(c);
  EXPECT_NEAR(s.LearningRate(0), 0.01, kTol);  // base * 1 / 10
  EXPECT_NEAR(s.LearningRate(4), 0.05, kTol);  // base * 5 / 10
  EXPECT_NEAR(s.LearningRate(8), 0.09, kTol);
  EXPECT_NEAR(s.LearningRate(9), 0.1, kTol);    // last warm-up step
  EXPECT_NEAR(s.LearningRate(10), 0.1, kTol);   // constant after
  EXPECT_NEAR(s.LearningRate(-3), 0.01, kTol);  // negative counts as 0
}

TEST(LrScheduleTest, CosineDecayStartMidpointAndEnd) {
  LrScheduleConfig c;
  c.base_lr = 1.0f;
  c.decay = LrDecay::kCosine;
  c.decay_steps = 100;
  c.min_lr = 0.1f;
  const LrSchedule s = Make(c);
  EXPECT_NEAR(s.LearningRate(0), 1.0, kTol);
  // 0.1 + 0.9 * 0.5 * (1 + cos(pi / 4)) = 0.1 + 0.45 * 1.70710678
  EXPECT_NEAR(s.LearningRate(25), 0.868198052, kTol);
  EXPECT_NEAR(s.LearningRate(50), 0.55, kTol);  // midpoint: (base + min) / 2
  // 0.1 + 0.45 * (1 + cos(0.99 pi)) = 0.1 + 0.45 * 4.9343e-4
  EXPECT_NEAR(s.LearningRate(99), 0.100222044, kTol);
  EXPECT_NEAR(s.LearningRate(100), 0.1, kTol);   // end
  EXPECT_NEAR(s.LearningRate(5000), 0.1, kTol);  // stays at min_lr
}

TEST(LrScheduleTest, CosineAfterWarmupCountsFromTheWarmupEnd) {
  LrScheduleConfig c;
  c.base_lr = 1.0f;
  c.warmup_steps = 10;
  c.decay = LrDecay::kCosine;
  c.decay_steps = 100;
  c.min_lr = 0.0f;
  const LrSchedule s = Make(c);
  EXPECT_NEAR(s.LearningRate(0), 0.1, kTol);
  EXPECT_NEAR(s.LearningRate(9), 1.0, kTol);
  EXPECT_NEAR(s.LearningRate(10), 1.0, kTol);  // decay starts at base
  EXPECT_NEAR(s.LearningRate(60), 0.5, kTol);  // its midpoint
  EXPECT_NEAR(s.LearningRate(110), 0.0, kTol);
}

TEST(LrScheduleTest, StepDecayEdges) {
  LrScheduleConfig c;
  c.base_lr = 0.4f;
  c.warmup_steps = 5;
  c.decay = LrDecay::kStep;
  c.step_size = 30;
  c.gamma = 0.1f;
  const LrSchedule s = Make(c);
  EXPECT_NEAR(s.LearningRate(4), 0.4, kTol);       // warm-up end
  EXPECT_NEAR(s.LearningRate(5), 0.4, kTol);       // p = 0
  EXPECT_NEAR(s.LearningRate(5 + 29), 0.4, kTol);  // last step before the first drop
  EXPECT_NEAR(s.LearningRate(5 + 30), 0.04, kTol);
  EXPECT_NEAR(s.LearningRate(5 + 59), 0.04, kTol);
  EXPECT_NEAR(s.LearningRate(5 + 60), 0.004, kTol);
  EXPECT_NEAR(s.LearningRate(5 + 90), 0.0004, 1e-9);
}

TEST(LrScheduleTest, CreateRejectsBadFields) {
  LrScheduleConfig c;
  c.base_lr = 0.0f;
  EXPECT_EQ(LrSchedule::Create(c).status(),
            absl::InvalidArgumentError("lr schedule base_lr must be finite and > 0, got 0"));
  c = LrScheduleConfig();
  c.warmup_steps = -1;
  EXPECT_EQ(LrSchedule::Create(c).status(),
            absl::InvalidArgumentError("lr schedule warmup_steps must be >= 0, got -1"));
  c = LrScheduleConfig();
  c.decay = LrDecay::kCosine;
  EXPECT_EQ(LrSchedule::Create(c).status(),
            absl::InvalidArgumentError("cosine lr schedule decay_steps must be > 0, got 0"));
  c.decay_steps = 10;
  c.min_lr = 1.0f;
  EXPECT_EQ(LrSchedule::Create(c).status(),
            absl::InvalidArgumentError("cosine lr schedule min_lr must be in [0, base_lr = 0.01], got 1"));
  c = LrScheduleConfig();
  c.decay = LrDecay::kStep;
  EXPECT_EQ(LrSchedule::Create(c).status(),
            absl::InvalidArgumentError("step lr schedule step_size must be > 0, got 0"));
  c.step_size = 3;
  c.gamma = 0.0f;
  EXPECT_EQ(LrSchedule::Create(c).status(),
            absl::InvalidArgumentError("step lr schedule gamma must be in (0, 1], got 0"));
}

TEST(ScaleLearningRateTest, Rules) {
  // 8192 / 256 = 32.
  EXPECT_NEAR(*ScaleLearningRate(0.1f, 8192, 256, LrScalingRule::kNone), 0.1, kTol);
  EXPECT_NEAR(*ScaleLearningRate(0.1f, 8192, 256, LrScalingRule::kLinear), 3.2, kTol);
  EXPECT_NEAR(*ScaleLearningRate(0.1f, 8192, 256, LrScalingRule::kSqrt), 0.565685425, kTol);
  // Smaller than the reference batch scales down.
  EXPECT_NEAR(*ScaleLearningRate(0.1f, 64, 256, LrScalingRule::kLinear), 0.025, kTol);
  EXPECT_NEAR(*ScaleLearningRate(0.1f, 64, 256, LrScalingRule::kSqrt), 0.05, kTol);
  EXPECT_EQ(ScaleLearningRate(0.1f, 0, 256, LrScalingRule::kLinear).status(),
            absl::InvalidArgumentError("lr scaling needs batches > 0, got global_batch 0 and reference_batch 256"));
}

TEST(ScaleLearningRateTest, ParsesRuleNames) {
  for (LrScalingRule r : {LrScalingRule::kNone, LrScalingRule::kLinear, LrScalingRule::kSqrt}) {
    auto parsed = ParseLrScalingRule(LrScalingRuleName(r));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, r);
  }
  EXPECT_EQ(ParseLrScalingRule("square").status(),
            absl::InvalidArgumentError("unknown lr scaling rule \"square\"; expected none, linear or sqrt"));
}

}  // namespace
}  // namespace ringmaster::engine::optim
