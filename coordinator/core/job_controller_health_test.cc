// JobController: sick nodes. A node whose worker reports a failing health
// check is NOT_READY: it gets no placement, and its jobs move off it as in a
// drain. A node where ranks of several distinct jobs failed is quarantined
// (cordoned by "coordinator") until an operator uncordons it.
#include <algorithm>
#include <string>

#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobControllerHealthTest : public JobControllerFixture {};

TEST_F(JobControllerHealthTest, ANotReadyNodeGetsNoPlacementAndItsJobMoves) {
  const std::string a = AddNode("host-a", 1);
  const std::string id = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA));
  RunToRunning(id);
  ASSERT_EQ(MustGet(id).placement().ranks(0).node_id(), a);
  AddNode("host-b", 1);
  listener_.Clear();

  ASSERT_TRUE(nodes_->Heartbeat(a, sessions_[a], "free space: /state has 10 MiB free, below 256 MiB").ok());
  EXPECT_EQ(nodes_->GetNode(a)->state(), v1::NODE_STATE_NOT_READY);
  controller_->Tick();
  // As in a drain: the ranks are asked for a checkpoint, and it moves the job.
  ASSERT_EQ(listener_.checkpoint_orders().size(), 1u);
  EXPECT_EQ(listener_.checkpoint_orders()[0].node_id, a);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(id, 40)).ok());
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  Exit(id, 0, -1, "", /*stopped_by_worker=*/true);
  controller_->Tick();
  v1::Job job = MustGet(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_STARTING);
  EXPECT_EQ(job.placement().ranks(0).hostname(), "host-b");
  EXPECT_FALSE(nodes_->GetNode(a)->draining());  // nothing runs there now

  // A new job does not go to the NOT_READY node, however free it is...
  const std::string other = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA));
  controller_->Tick();
  EXPECT_EQ(State(other), v1::JOB_STATE_QUEUED);
  // ...until its checks pass again.
  ASSERT_TRUE(nodes_->Heartbeat(a, sessions_[a], "").ok());
  controller_->Tick();
  ASSERT_EQ(State(other), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(other).placement().ranks(0).node_id(), a);
}

TEST_F(JobControllerHealthTest, RanksOfDistinctJobsFailingQuarantineTheNodeUntilUncordoned) {
  options_.quarantine = QuarantinePolicy{2, absl::Hours(1)};
  Restart();
  const std::string a = AddNode("host-a", 1);
  const std::string b = AddNode("host-b", 1);
  // One job failing twice there is no sign of a sick node (its strikes keep it off).
  const std::string first = MustSubmit(MakeSpec(1, 1));
  RunToRunning(first);
  ASSERT_EQ(MustGet(first).placement().ranks(0).node_id(), a);
  Exit(first, 0, 1);
  controller_->Tick();
  ASSERT_EQ(MustGet(first).placement().ranks(0).node_id(), a);
  JoinAll(first);
  Exit(first, 0, 1);
  controller_->Tick();
  ASSERT_EQ(MustGet(first).placement().ranks(0).node_id(), b);
  JoinAll(first);
  EXPECT_EQ(nodes_->GetNode(a)->state(), v1::NODE_STATE_READY);

  // A second job failing there quarantines it.
  const std::string second = MustSubmit(MakeSpec(1, 1));
  RunToRunning(second);
  ASSERT_EQ(MustGet(second).placement().ranks(0).node_id(), a);
  Exit(second, 0, 1);
  v1::NodeInfo node = *nodes_->GetNode(a);
  EXPECT_EQ(node.state(), v1::NODE_STATE_CORDONED);
  EXPECT_EQ(node.cordoned_by(), "coordinator");
  const std::string reason = "quarantined: ranks of 2 jobs failed here within 1h (" +
                             std::min(first, second) + ", " + std::max(first, second) +
                             "); uncordon it once the node is checked";
  EXPECT_EQ(node.cordon_reason(), reason);
  EXPECT_EQ(Events(second).back().reason(),
            "rank 0 on host-a exited with code 1; node host-a is " + reason + "; restarting (restart 1 of 3)");
  // The job that failed there restarts elsewhere, or waits: host-b is busy.
  controller_->Tick();
  EXPECT_NE(State(second), v1::JOB_STATE_STARTING);

  // An operator's uncordon ends the quarantine and its count.
  ASSERT_TRUE(controller_->CordonNode(a, "", "").ok());
  controller_->Tick();
  ASSERT_EQ(State(second), v1::JOB_STATE_STARTING);
  ASSERT_EQ(MustGet(second).placement().ranks(0).node_id(), a);
  JoinAll(second);
  Exit(second, 0, 1);
  EXPECT_EQ(nodes_->GetNode(a)->cordoned_by(), "");
}

}  // namespace
}  // namespace ringmaster::coordinator
