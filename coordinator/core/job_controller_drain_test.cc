// JobController: cordon, uncordon and drain. A drained node's jobs are asked
// for a checkpoint, moved once it is committed (or the drain's patience runs
// out), resume elsewhere from it, and keep their restarts.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobControllerDrainTest : public JobControllerFixture {};

TEST_F(JobControllerDrainTest, CordonedNodesGetNoNewJobsUntilUncordoned) {
  std::string a = AddNode("host-a", 1);
  absl::StatusOr<v1::NodeInfo> cordoned = controller_->CordonNode("host-a", "alice", "flaky NVLink");
  ASSERT_TRUE(cordoned.ok()) << cordoned.status();
  EXPECT_EQ(cordoned->state(), v1::NODE_STATE_CORDONED);
  std::string id = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA));
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_QUEUED);
  ASSERT_TRUE(controller_->CordonNode(a, "", "").ok());
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_STARTING);
  EXPECT_EQ(controller_->CordonNode("host-z", "alice", "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobControllerDrainTest, DrainCheckpointsThenMovesTheJobWithoutUsingARestart) {
  std::string a = AddNode("host-a", 1);
  std::string id = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA, 0, /*max_restarts=*/0));
  RunToRunning(id);
  AddNode("host-b", 1);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(id, 100)).ok());
  const int64_t gen = MustGet(id).generation();
  listener_.Clear();

  absl::StatusOr<DrainResult> drain = controller_->DrainNode("host-a", "alice", "driver upgrade");
  ASSERT_TRUE(drain.ok()) << drain.status();
  EXPECT_EQ(drain->job_ids, std::vector<std::string>{id});
  EXPECT_TRUE(drain->node.draining());
  EXPECT_EQ(drain->node.cordoned_by(), "alice");
  // The ranks are asked for a checkpoint; the job keeps running meanwhile.
  ASSERT_EQ(listener_.checkpoint_orders().size(), 1u);
  EXPECT_EQ(listener_.checkpoint_orders()[0].node_id, a);
  EXPECT_EQ(listener_.checkpoint_orders()[0].generation, gen);
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(Events(id).back().kind(), v1::JOB_EVENT_KIND_DRAIN_REQUESTED);
  AdvanceWithHeartbeats(absl::Seconds(10));
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(listener_.checkpoint_orders().size(), 1u);  // sent again only after 30 s
  EXPECT_TRUE(listener_.stops().empty());

  // The drain's checkpoint moves it: the generation stops (no state dump).
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(id, 130)).ok());
  v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(job.reason(), "NodeDrained");
  EXPECT_EQ(job.message(),
            "moved off node host-a, which is being drained: checkpoint at step 130 written; restarting (not counted "
            "against max_restarts)");
  ASSERT_EQ(listener_.stops().size(), 1u);
  EXPECT_FALSE(listener_.stops()[0].dump_state);
  Exit(id, 0, -1, "", /*stopped_by_worker=*/true);
  controller_->Tick();
  job = MustGet(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_STARTING);
  EXPECT_EQ(job.placement().ranks(0).hostname(), "host-b");
  EXPECT_EQ(job.restarts(), 0);
  ASSERT_TRUE(listener_.starts().back().resume_from.has_value());
  EXPECT_EQ(listener_.starts().back().resume_from->step(), 130);
  EXPECT_EQ(Events(id).back().reason(),
            absl::StrCat("restart after NodeDrained (not counted against max_restarts 0): generation ", gen + 1,
                         " on host-b (1 x 1 ranks); resuming from step 130"));
  EXPECT_EQ(Timeline(id),
            "SUBMITTED:QUEUED PLACED:PLACED STARTING:STARTING RUNNING:RUNNING CHECKPOINT_COMMITTED:RUNNING "
            "DRAIN_REQUESTED:RUNNING CHECKPOINT_COMMITTED:RUNNING NODE_DRAINED:RESTARTING RESTARTING:STARTING");
  // Nothing runs on host-a now: the drain ends; the node stays cordoned.
  controller_->Tick();
  v1::NodeInfo drained = *nodes_->GetNode(a);
  EXPECT_FALSE(drained.draining());
  EXPECT_EQ(drained.state(), v1::NODE_STATE_CORDONED);
  JoinAll(id);
  ExitAll(id, 0);
  EXPECT_EQ(State(id), v1::JOB_STATE_SUCCEEDED);
}

TEST_F(JobControllerDrainTest, WithoutACheckpointTheJobMovesAfterTheTimeout) {
  AddNode("host-a", 1);
  std::string id = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA));
  RunToRunning(id);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(id, 40)).ok());
  listener_.Clear();
  ASSERT_TRUE(controller_->DrainNode("host-a", "alice", "").ok());
  AdvanceWithHeartbeats(absl::Seconds(35));
  controller_->Tick();
  EXPECT_EQ(listener_.checkpoint_orders().size(), 2u);  // asked again after 30 s
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  AdvanceWithHeartbeats(options_.drain_checkpoint_timeout);
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  std::vector<v1::JobEvent> events = Events(id);
  ASSERT_EQ(events.back().kind(), v1::JOB_EVENT_KIND_NODE_DRAINED);
  EXPECT_EQ(events.back().reason(),
            "moved off node host-a, which is being drained: no checkpoint within 5m of the request; moved from its "
            "newest checkpoint; restarting (not counted against max_restarts)");
  Exit(id, 0, -1, "", true);
  AddNode("host-b", 1);
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_STARTING);
  EXPECT_EQ(listener_.starts().back().resume_from->step(), 40);
  EXPECT_EQ(MustGet(id).restarts(), 0);
}

TEST_F(JobControllerDrainTest, AJobNotYetRunningMovesAtOnce) {
  AddNode("host-a", 1);
  std::string id = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA));
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  absl::StatusOr<DrainResult> drain = controller_->DrainNode("host-a", "alice", "");
  ASSERT_TRUE(drain.ok());
  EXPECT_TRUE(drain->job_ids.empty());
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(MustGet(id).reason(), "NodeDrained");
  // Its rank holds the slot until it exits; then the drain is over.
  controller_->Tick();
  EXPECT_TRUE(nodes_->GetNode(drain->node.node_id())->draining());
  Exit(id, 0, -1, "", true);
  controller_->Tick();
  EXPECT_FALSE(nodes_->GetNode(drain->node.node_id())->draining());
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);  // nowhere else to go
}

TEST_F(JobControllerDrainTest, AWorkerThatDrainsItselfGetsItsJobsMoved) {
  std::string a = AddNode("host-a", 1);
  std::string id = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA));
  RunToRunning(id);
  listener_.Clear();
  // The worker registers again asking for a drain (it got SIGUSR1).
  v1::NodeInfo node = *nodes_->GetNode(a);
  ASSERT_TRUE(
      controller_->reconciler().RegisterNode(node, {{id, MustGet(id).generation(), 0}}, /*worker_drains=*/true).ok());
  EXPECT_EQ(nodes_->GetNode(a)->cordoned_by(), kCordonedByWorker);
  controller_->Tick();
  ASSERT_EQ(listener_.checkpoint_orders().size(), 1u);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(id, 7)).ok());
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
}

}  // namespace
}  // namespace ringmaster::coordinator
