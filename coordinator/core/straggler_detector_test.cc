#include "coordinator/core/straggler_detector.h"

#include <optional>

#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

constexpr int64_t kGeneration = 1;

v1::StepMetrics Step(int64_t step, double step_time, double communication = 0) {
  v1::StepMetrics m;
  m.set_step(step);
  m.set_step_time_seconds(step_time);
  m.set_communication_seconds(communication);
  return m;
}

StragglerPolicy Policy(double factor = 1.3, int64_t steps = 50) {
  StragglerPolicy p;
  p.factor = factor;
  p.steps = steps;
  return p;
}

// Reports of `ranks` ranks every 10 steps from `from` to `to`; rank `slow`
// takes `slow_own` of own work per step, the others 0.1 s; every rank's step
// lasts as long as the slowest one's (the data-parallel all-reduce), the
// fast ones waiting the difference in communication. Returns the changes.
std::vector<StragglerChange> Reports(StragglerDetector& d, int ranks, int64_t from, int64_t to, int slow,
                                 double slow_own, const StragglerPolicy& policy = Policy()) {
  std::vector<StragglerChange> changes;
  const double step_time = std::max(0.1, slow_own);
  for (int64_t step = from; step <= to; step += 10) {
    for (int r = 0; r < ranks; ++r) {
      const double own = r == slow ? slow_own : 0.1;
      std::optional<StragglerChange> c = d.Observe(kGeneration, r, 0, Step(step, step_time, step_time - own), policy);
      if (c.has_value()) changes.push_back(*c);
    }
  }
  return changes;
}

TEST(StragglerDetectorTest, FlaggedAfterTheConfiguredStepsNotBefore) {
  StragglerDetector d;
  // Slow from the report at step 10 on: it covers steps after 10's previous
  // report (none: counted from 10); 50 steps later is step 60.
  EXPECT_TRUE(Reports(d, 4, 10, 50, 2, 0.2).empty());
  EXPECT_FALSE(d.Flagged(2));
  std::vector<StragglerChange> changes = Reports(d, 4, 60, 60, 2, 0.2);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].rank, 2);
  EXPECT_TRUE(changes[0].flagged);
  EXPECT_NEAR(changes[0].ratio, 2.0, 1e-9);
  EXPECT_EQ(changes[0].since_step, 10);
  EXPECT_TRUE(d.Flagged(2));
  EXPECT_EQ(d.FlaggedCount(), 1);
  EXPECT_TRUE(Reports(d, 4, 70, 200, 2, 0.2).empty());  // flagged once
}

TEST(StragglerDetectorTest, StepsCountedFromStepNumbersNotReports) {
  StragglerDetector d;
  StragglerPolicy policy = Policy(1.3, 50);
  d.Observe(kGeneration, 0, 0, Step(100, 0.1), policy);
  d.Observe(kGeneration, 1, 0, Step(100, 0.3), policy);  // slow since 100
  // One report 49 steps later: not yet; one more step: flagged.
  d.Observe(kGeneration, 0, 0, Step(149, 0.1), policy);
  EXPECT_FALSE(d.Observe(kGeneration, 1, 0, Step(149, 0.3), policy).has_value());
  std::optional<StragglerChange> c = d.Observe(kGeneration, 1, 0, Step(150, 0.3), policy);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->flagged);
  EXPECT_NEAR(c->ratio, 3.0, 1e-9);  // 2 ranks: compared with the other one, not with their mean
}

TEST(StragglerDetectorTest, ABriefSlowdownIsNotFlagged) {
  StragglerDetector d;
  EXPECT_TRUE(Reports(d, 3, 10, 40, 1, 0.5).empty());
  EXPECT_TRUE(Reports(d, 3, 50, 60, 1, 0.1).empty());  // back to normal: the run starts over
  EXPECT_TRUE(Reports(d, 3, 70, 100, 1, 0.5).empty());  // slow since 60: 40 steps
  EXPECT_FALSE(d.Flagged(1));
}

TEST(StragglerDetectorTest, ARecoveringRankIsUnflagged) {
  StragglerDetector d;
  ASSERT_EQ(Reports(d, 4, 10, 60, 3, 0.2).size(), 1u);
  EXPECT_TRUE(Reports(d, 4, 70, 100, 3, 0.1).empty());  // below the factor since the report at 60
  EXPECT_TRUE(d.Flagged(3));
  std::vector<StragglerChange> changes = Reports(d, 4, 110, 110, 3, 0.1);  // 60 + 50
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].rank, 3);
  EXPECT_FALSE(changes[0].flagged);
  EXPECT_EQ(changes[0].since_step, 60);
  EXPECT_FALSE(d.Flagged(3));
  EXPECT_EQ(d.FlaggedCount(), 0);
}

TEST(StragglerDetectorTest, AUniformlySlowJobIsNotFlagged) {
  StragglerDetector d;
  StragglerPolicy policy = Policy();
  for (int64_t step = 10; step <= 500; step += 10) {
    for (int r = 0; r < 4; ++r) EXPECT_FALSE(d.Observe(kGeneration, r, 0, Step(step, 5.0, 0.2), policy).has_value());
  }
  EXPECT_EQ(d.FlaggedCount(), 0);
}

TEST(StragglerDetectorTest, DataParallelWaitIsNotOwnWork) {
  // Every rank's step time is the same 0.4 s; ranks 0, 1, 3 wait 0.3 s of
  // it in the all-reduce for rank 2, which computes for 0.4 s: only rank 2
  // is flagged, though the step times are equal.
  StragglerDetector d;
  std::vector<StragglerChange> changes = Reports(d, 4, 10, 100, 2, 0.4);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].rank, 2);
  EXPECT_NEAR(changes[0].ratio, 4.0, 1e-9);
}

TEST(StragglerDetectorTest, DataWaitCountsAsOwnWork) {
  v1::StepMetrics starved = Step(10, 0.5, 0.1);
  starved.set_data_wait_seconds(0.3);  // part of the 0.5 s the rank itself spent
  EXPECT_NEAR(StragglerDetector::OwnSeconds(starved), 0.4, 1e-12);
}

TEST(StragglerDetectorTest, PipelineStagesAreComparedWithinTheirStage) {
  // Stage 1 does twice the work of stage 0: no straggler.
  StragglerDetector d;
  StragglerPolicy policy = Policy();
  for (int64_t step = 10; step <= 200; step += 10) {
    for (int r = 0; r < 4; ++r) {
      const int stage = r % 2;
      EXPECT_FALSE(d.Observe(kGeneration, r, stage, Step(step, stage == 1 ? 0.2 : 0.1), policy).has_value());
    }
  }
}

TEST(StragglerDetectorTest, TinyDifferencesAreNoise) {
  // 0.5 ms against 0.2 ms: 2.5x, but under a millisecond a step.
  StragglerDetector e;
  StragglerPolicy policy = Policy();
  for (int64_t step = 10; step <= 500; step += 10) {
    e.Observe(kGeneration, 0, 0, Step(step, 0.0002), policy);
    EXPECT_FALSE(e.Observe(kGeneration, 1, 0, Step(step, 0.0005), policy).has_value());
  }
}

TEST(StragglerDetectorTest, ANewGenerationStartsOver) {
  StragglerDetector d;
  ASSERT_EQ(Reports(d, 2, 10, 60, 1, 0.3).size(), 1u);
  StragglerPolicy policy = Policy();
  EXPECT_FALSE(d.Observe(kGeneration + 1, 1, 0, Step(70, 0.3), policy).has_value());
  EXPECT_FALSE(d.Flagged(1));
}

TEST(StragglerDetectorTest, DisabledByZeroSteps) {
  StragglerDetector d;
  EXPECT_TRUE(Reports(d, 2, 10, 500, 1, 1.0, Policy(1.3, 0)).empty());
  EXPECT_TRUE(Reports(d, 2, 10, 500, 1, 1.0, Policy(0, 50)).empty());
}

}  // namespace
}  // namespace ringmaster::coordinator
