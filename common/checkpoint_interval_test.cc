#include "common/checkpoint_interval.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

v1::AutoIntervalInputs Inputs(double mtbf, double lo = 10, double hi = 3600) {
  v1::AutoIntervalInputs in;
  in.set_mtbf_seconds(mtbf);
  in.set_mtbf_basis("the prior (no failures seen)");
  in.set_min_seconds(lo);
  in.set_max_seconds(hi);
  return in;
}

TEST(ChooseAutoInterval, IsTheYoungDalyOptimumWithinTheBounds) {
  // sqrt(2 x 2 s x 4 h) = 240 s.
  v1::CheckpointInterval t = ChooseAutoInterval(Inputs(4 * 3600), 2.0);
  EXPECT_DOUBLE_EQ(t.seconds(), 240);
  EXPECT_EQ(t.why(), "auto: sqrt(2 x 2s stall x 4h MTBF) = 4m; MTBF: the prior (no failures seen)");
  // A cheap checkpoint: the optimum (1.7 s) is raised to the lower bound.
  t = ChooseAutoInterval(Inputs(4 * 3600), 0.0001);
  EXPECT_DOUBLE_EQ(t.seconds(), 10);
  EXPECT_NE(t.why().find("raised to the lower bound 10s"), std::string::npos) << t.why();
  // A dear one on a reliable cluster: cut to the upper bound.
  t = ChooseAutoInterval(Inputs(1e7), 600);
  EXPECT_DOUBLE_EQ(t.seconds(), 3600);
  EXPECT_NE(t.why().find("cut to the upper bound 1h"), std::string::npos) << t.why();
}

TEST(ChooseAutoInterval, TheFirstCheckpointMeasuresTheStall) {
  const v1::CheckpointInterval t = ChooseAutoInterval(Inputs(4 * 3600, 7), 0);
  EXPECT_DOUBLE_EQ(t.seconds(), 7);
  EXPECT_NE(t.why().find("the first checkpoint after the lower bound 7s"), std::string::npos) << t.why();
}

TEST(ChooseAutoInterval, FailuresShortenIt) {
  const double reliable = ChooseAutoInterval(Inputs(86400), 0.5).seconds();
  const double failing = ChooseAutoInterval(Inputs(600), 0.5).seconds();
  EXPECT_NEAR(reliable / failing, std::sqrt(86400.0 / 600), 1e-9);
}

TEST(EstimateMtbf, ThePriorWithoutFailures) {
  std::string basis;
  FailureHistory h;
  h.job_running_seconds = 1000;
  EXPECT_DOUBLE_EQ(EstimateMtbf(h, &basis), kDefaultMtbfPriorSeconds);
  EXPECT_EQ(basis, "the prior (no failures seen)");
}

TEST(EstimateMtbf, TheJobsOwnFailures) {
  std::string basis;
  FailureHistory h;
  h.job_failures = 2;
  h.job_running_seconds = 360;
  EXPECT_DOUBLE_EQ(EstimateMtbf(h, &basis), 180);
  EXPECT_EQ(basis, "the job's 2 failures in 6m of training");
  // Failure-free training raises it again, up to the prior.
  h.job_running_seconds = 1e6;
  EXPECT_DOUBLE_EQ(EstimateMtbf(h, &basis), kDefaultMtbfPriorSeconds);
}

TEST(EstimateMtbf, FailuresOnItsNodes) {
  std::string basis;
  FailureHistory h;
  h.node_failures = 24;
  h.window_seconds = 86400;
  EXPECT_DOUBLE_EQ(EstimateMtbf(h, &basis), 3600);
  EXPECT_EQ(basis, "24 failures on its nodes in the last 24h");
}

TEST(IntervalInForce, NamesTheSpecsOwnSetting) {
  v1::CheckpointPolicy p;
  p.set_interval_steps(250);
  v1::CheckpointInterval t = IntervalInForce(p, Inputs(3600));
  EXPECT_EQ(t.steps(), 250);
  EXPECT_EQ(t.why(), "checkpoint.interval_steps 250 (the spec)");
  p.Clear();
  p.set_interval_seconds(30);
  t = IntervalInForce(p, Inputs(3600));
  EXPECT_DOUBLE_EQ(t.seconds(), 30);
  p.Clear();
  p.set_interval("auto");
  v1::AutoIntervalInputs in = Inputs(3600);
  in.set_stall_seconds(0.5);
  EXPECT_DOUBLE_EQ(IntervalInForce(p, in).seconds(), std::sqrt(2 * 0.5 * 3600));
}

}  // namespace
}  // namespace ringmaster

namespace ringmaster {
namespace {

TEST(HumanSeconds, ReadsAsPeopleWriteDurations) {
  EXPECT_EQ(HumanSeconds(0.00042), "0.42ms");
  EXPECT_EQ(HumanSeconds(0.85), "850ms");
  EXPECT_EQ(HumanSeconds(10.71), "10.7s");
  EXPECT_EQ(HumanSeconds(390), "6m30s");
  EXPECT_EQ(HumanSeconds(4 * 3600), "4h");
}

}  // namespace
}  // namespace ringmaster
