#include "engine/train/checkpoint_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

TEST(CheckpointSchedule, EveryStepsIsARuleOfTheStep) {
  const CheckpointSchedule s = CheckpointSchedule::EverySteps(50);
  EXPECT_FALSE(s.timed());
  EXPECT_TRUE(s.DueAtStep(100));
  EXPECT_FALSE(s.DueAtStep(101));
  EXPECT_FALSE(s.DueAt(1e9));
  EXPECT_EQ(s.interval().why(), "checkpoint.interval_steps 50 (the spec)");
  EXPECT_FALSE(CheckpointSchedule::EverySteps(0).DueAtStep(100));  // only at the end
}

TEST(CheckpointSchedule, EverySecondsCountsFromTheLastCheckpoint) {
  CheckpointSchedule s = CheckpointSchedule::EverySeconds(30);
  s.Start(100);
  EXPECT_FALSE(s.DueAt(129));
  EXPECT_TRUE(s.DueAt(130));
  s.Checkpointed(131, 0.5);
  EXPECT_FALSE(s.DueAt(160));
  EXPECT_TRUE(s.DueAt(161));
  EXPECT_DOUBLE_EQ(s.interval().seconds(), 30);  // a fixed interval stays
}

TEST(CheckpointSchedule, AutoMeasuresTheStallFirstThenFollowsYoungDaly) {
  v1::AutoIntervalInputs in;
  in.set_mtbf_seconds(3600);
  in.set_mtbf_basis("the prior (no failures seen)");
  in.set_min_seconds(5);
  in.set_max_seconds(600);
  CheckpointSchedule s = CheckpointSchedule::Auto(in);
  s.Start(0);
  EXPECT_DOUBLE_EQ(s.interval().seconds(), 5);  // the lower bound: the first measures the stall
  EXPECT_TRUE(s.DueAt(5));
  s.Checkpointed(5, 0.125);  // sqrt(2 x 0.125 x 3600) = 30 s
  EXPECT_DOUBLE_EQ(s.interval().seconds(), 30);
  EXPECT_DOUBLE_EQ(s.interval().stall_seconds(), 0.125);
  EXPECT_FALSE(s.DueAt(34));
  EXPECT_TRUE(s.DueAt(35));
  s.Checkpointed(35, 2);  // a dearer checkpoint: a longer interval
  EXPECT_DOUBLE_EQ(s.interval().seconds(), 120);
}

TEST(CheckpointSchedule, AutoStartsFromAStallMeasuredBefore) {
  v1::AutoIntervalInputs in;
  in.set_mtbf_seconds(60);
  in.set_min_seconds(1);
  in.set_max_seconds(600);
  in.set_stall_seconds(0.3);  // an earlier generation's
  const CheckpointSchedule s = CheckpointSchedule::Auto(in);
  EXPECT_DOUBLE_EQ(s.interval().seconds(), 6);
}

TEST(CheckpointSchedule, AutoWithoutACoordinatorUsesTheDefaults) {
  CheckpointSchedule s = CheckpointSchedule::Auto({});
  EXPECT_TRUE(s.timed());
  s.Checkpointed(0, 0.5);  // sqrt(2 x 0.5 x 4 h) = 120 s
  EXPECT_DOUBLE_EQ(s.interval().seconds(), 120);
}

}  // namespace
}  // namespace ringmaster::engine
