#include "engine/train/step_mean.h"

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

StepReport Step(int64_t step, double seconds, double comm = 0, double data_wait = 0) {
  StepReport r;
  r.step = step;
  r.seconds = seconds;
  r.comm_seconds = comm;
  r.data_wait_seconds = data_wait;
  return r;
}

TEST(StepMeanTest, MeansOverTheLastWindowOfSteps) {
  StepMean mean(4);
  EXPECT_DOUBLE_EQ(mean.Add(Step(1, 1.0, 0.5, 0.1)).seconds, 1.0);
  StepReport r = mean.Add(Step(2, 3.0, 0.5, 0.3));
  EXPECT_EQ(r.step, 2);
  EXPECT_DOUBLE_EQ(r.seconds, 2.0);
  EXPECT_DOUBLE_EQ(r.comm_seconds, 0.5);
  EXPECT_DOUBLE_EQ(r.data_wait_seconds, 0.2);
  mean.Add(Step(3, 1.0));
  mean.Add(Step(4, 1.0));
  // Step 1 (1.0) leaves the window; 3.0, 1.0, 1.0, 3.0 remain.
  EXPECT_DOUBLE_EQ(mean.Add(Step(5, 3.0)).seconds, 2.0);
}

TEST(StepMeanTest, AStallBetweenSamplesShowsInTheMean) {
  // One stalled step (a SIGSTOP of 0.3 s) among 0.01 s steps: a report of
  // any step within the window after it carries it.
  StepMean mean(10);
  for (int64_t s = 1; s <= 20; ++s) mean.Add(Step(s, 0.01));
  mean.Add(Step(21, 0.31));
  for (int64_t s = 22; s <= 29; ++s) mean.Add(Step(s, 0.01));
  EXPECT_NEAR(mean.Add(Step(30, 0.01)).seconds, 0.04, 1e-12);
  EXPECT_NEAR(mean.Add(Step(31, 0.01)).seconds, 0.01, 1e-12);  // out of the window
}

TEST(StepMeanTest, AWindowOfOneIsTheStepItself) {
  StepMean mean(0);  // taken as 1
  mean.Add(Step(1, 5.0));
  EXPECT_DOUBLE_EQ(mean.Add(Step(2, 2.0)).seconds, 2.0);
}

}  // namespace
}  // namespace ringmaster::engine
