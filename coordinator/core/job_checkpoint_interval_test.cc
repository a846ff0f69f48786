// JobController: checkpoint.interval auto — the inputs each generation's
// ranks get (the job's failures, its nodes', the prior, the operator's
// bounds) and the interval in force that GetJob (`ringmaster describe`)
// shows, from the dispatch and from each commit's stall; on the fake clock.
#include <string>

#include "absl/time/time.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobCheckpointIntervalTest : public JobControllerFixture {
 protected:
  void SetUp() override {
    JobControllerFixture::SetUp();
    options_.checkpoint_interval.min = absl::Seconds(5);
    options_.checkpoint_interval.max = absl::Minutes(30);
    options_.checkpoint_interval.mtbf_prior = absl::Hours(2);
    options_.checkpoint_interval.failure_window = absl::Hours(1);
    Restart();  // with these options
  }

  // An auto job (the default) of 2 ranks on one node, RUNNING.
  std::string RunAutoJob() {
    v1::JobSpec spec = MakeSpec(1, 2, v1::ResourceSpec::CUDA, 0, /*max_restarts=*/5);
    spec.mutable_checkpoint()->set_interval("auto");
    std::string id = MustSubmit(spec);
    controller_->ScheduleNow();
    JoinAll(id);
    EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
    return id;
  }

  v1::AutoIntervalInputs Inputs(const std::string& node_id) {
    std::vector<StartOrder> orders = Assignments(node_id);
    EXPECT_EQ(orders.size(), 1u);
    return orders.empty() ? v1::AutoIntervalInputs() : orders[0].auto_interval;
  }
};

TEST_F(JobCheckpointIntervalTest, TheFirstGenerationGetsThePriorAndTheBounds) {
  const std::string node = AddNode("host-a", 2);
  const std::string id = RunAutoJob();
  const v1::AutoIntervalInputs in = Inputs(node);
  EXPECT_DOUBLE_EQ(in.mtbf_seconds(), 7200);
  EXPECT_EQ(in.mtbf_basis(), "the prior (no failures seen)");
  EXPECT_DOUBLE_EQ(in.min_seconds(), 5);
  EXPECT_DOUBLE_EQ(in.max_seconds(), 1800);
  EXPECT_DOUBLE_EQ(in.stall_seconds(), 0);
  const v1::CheckpointInterval shown = MustGet(id).checkpoint_interval();
  EXPECT_DOUBLE_EQ(shown.seconds(), 5);
  EXPECT_EQ(shown.why(), "auto: the first checkpoint after the lower bound 5s, to measure its stall; MTBF 2h: "
                         "the prior (no failures seen)");
}

TEST_F(JobCheckpointIntervalTest, ACommitsStallSetsTheIntervalShown) {
  AddNode("host-a", 2);
  const std::string id = RunAutoJob();
  ShardCommit commit = CheckpointCommit(id, 100);
  commit.stall_seconds = 0.5;  // sqrt(2 x 0.5 s x 2 h) = 84.9 s
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(commit).ok());
  const v1::CheckpointInterval shown = MustGet(id).checkpoint_interval();
  EXPECT_NEAR(shown.seconds(), 84.85, 0.01);
  EXPECT_DOUBLE_EQ(shown.stall_seconds(), 0.5);
  EXPECT_EQ(shown.why(), "auto: sqrt(2 x 500ms stall x 2h MTBF) = 1m25s; MTBF: the prior (no failures seen)");
}

TEST_F(JobCheckpointIntervalTest, AFailureShortensTheNextGenerationsInterval) {
  const std::string node = AddNode("host-a", 2);
  const std::string id = RunAutoJob();
  ShardCommit commit = CheckpointCommit(id, 100);
  commit.stall_seconds = 0.5;
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(commit).ok());
  AdvanceWithHeartbeats(absl::Seconds(100));
  Exit(id, 1, 137);
  ASSERT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  Exit(id, 0, -1, "", /*stopped_by_worker=*/true);
  controller_->ScheduleNow();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  const v1::AutoIntervalInputs in = Inputs(node);
  // One failure in 100 s of RUNNING: the job's own MTBF, shorter than the
  // node's (1 failure in the 1 h window) and the prior.
  EXPECT_DOUBLE_EQ(in.mtbf_seconds(), 100);
  EXPECT_EQ(in.mtbf_basis(), "the job's 1 failure in 1m40s of training");
  EXPECT_DOUBLE_EQ(in.stall_seconds(), 0.5);  // the measured one: no first checkpoint at the bound
  const v1::CheckpointInterval shown = MustGet(id).checkpoint_interval();
  EXPECT_DOUBLE_EQ(shown.seconds(), 10);  // sqrt(2 x 0.5 x 100)
}

TEST_F(JobCheckpointIntervalTest, FailuresOnItsNodesCountForANewJob) {
  const std::string node = AddNode("host-a", 2);
  // Another job fails on the node twice.
  const std::string other = RunAutoJob();
  for (int i = 0; i < 2; ++i) {
    Exit(other, 1, 137);
    Exit(other, 0, -1, "", /*stopped_by_worker=*/true);
    controller_->ScheduleNow();
    JoinAll(other);
  }
  ASSERT_TRUE(controller_->lifecycle().Cancel(other, "done").ok());
  ExitAll(other, 0, /*stopped_by_worker=*/true);
  const std::string id = RunAutoJob();
  const v1::AutoIntervalInputs in = Inputs(node);
  EXPECT_DOUBLE_EQ(in.mtbf_seconds(), 1800);  // 1 h / 2
  EXPECT_EQ(in.mtbf_basis(), "2 failures on its nodes in the last 1h");
  (void)id;
}

// The restart latency: from the failure's detection until every rank of the
// next generation reported a step (STEPPING), which ends the restart phase.
TEST_F(JobCheckpointIntervalTest, SteppingSaysHowLongTheRestartTook) {
  AddNode("host-a", 2);
  const std::string id = RunAutoJob();
  v1::StepMetrics m;
  m.set_step(1);
  ASSERT_TRUE(controller_->lifecycle().ReportProgress(id, 1, 0, m).ok());
  ASSERT_TRUE(controller_->lifecycle().ReportProgress(id, 1, 1, m).ok());
  EXPECT_EQ(Events(id).back().kind(), v1::JOB_EVENT_KIND_STEPPING);
  EXPECT_EQ(Events(id).back().reason(), "all 2 ranks are stepping");
  AdvanceWithHeartbeats(absl::Seconds(50));
  Exit(id, 1, 137);
  AdvanceWithHeartbeats(absl::Seconds(1));
  Exit(id, 0, -1, "", /*stopped_by_worker=*/true);
  controller_->ScheduleNow();
  JoinAll(id);  // RUNNING: the ranks load and resume
  AdvanceWithHeartbeats(absl::Seconds(2));
  ASSERT_TRUE(controller_->lifecycle().ReportProgress(id, 2, 0, m).ok());
  EXPECT_NE(Events(id).back().kind(), v1::JOB_EVENT_KIND_STEPPING);  // one rank is not enough
  ASSERT_TRUE(controller_->lifecycle().ReportProgress(id, 2, 1, m).ok());
  EXPECT_EQ(Events(id).back().kind(), v1::JOB_EVENT_KIND_STEPPING);
  EXPECT_EQ(Events(id).back().reason(), "all 2 ranks are stepping 3.0s after the previous generation stopped");
  const v1::GoodputBreakdown g = MustGet(id).goodput();
  EXPECT_DOUBLE_EQ(g.restart_seconds(), 3);  // RUNNING while loading counted as restart
  EXPECT_DOUBLE_EQ(g.recomputed_seconds(), 50);
}

TEST_F(JobCheckpointIntervalTest, AFixedIntervalIsShownAsTheSpecSetIt) {
  AddNode("host-a", 2);
  v1::JobSpec spec = MakeSpec(1, 2, v1::ResourceSpec::CUDA, 0, 3);
  spec.mutable_checkpoint()->set_interval_steps(250);
  const std::string id = MustSubmit(spec);
  controller_->ScheduleNow();
  EXPECT_EQ(MustGet(id).checkpoint_interval().why(), "checkpoint.interval_steps 250 (the spec)");
  EXPECT_EQ(MustGet(id).checkpoint_interval().steps(), 250);
}

}  // namespace
}  // namespace ringmaster::coordinator
