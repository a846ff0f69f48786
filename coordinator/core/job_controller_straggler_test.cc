// JobController: stragglers. A rank slower than its peers for the policy's
// steps is flagged on the timeline; a job that consents
// (restart.move_stragglers) is moved off its node, checkpoint first, and
// keeps off it; one that does not is only flagged.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobControllerStragglerTest : public JobControllerFixture {
 protected:
  void SetUp() override {
    JobControllerFixture::SetUp();
    options_.stragglers.factor = 1.3;
    options_.stragglers.steps = 20;
    options_.stragglers.move_window = absl::Minutes(30);
    Restart();
  }

  // A 2-node job, one rank per node, RUNNING; `consent`: restart.move_stragglers.
  std::string RunningJob(bool consent) {
    v1::JobSpec spec = MakeSpec(2, 1, v1::ResourceSpec::CUDA, 0, /*max_restarts=*/0);
    spec.mutable_restart()->set_move_stragglers(consent);
    std::string id = MustSubmit(spec);
    RunToRunning(id);
    return id;
  }

  // Both ranks report every 10 steps in (from, to]; rank 1 computes `slow`
  // seconds a step, rank 0 0.1 s and waits the rest in the all-reduce.
  void Report(const std::string& id, int64_t from, int64_t to, double slow) {
    const int64_t generation = MustGet(id).generation();
    for (int64_t step = from + 10; step <= to; step += 10) {
      for (int32_t rank = 0; rank < 2; ++rank) {
        v1::StepMetrics m;
        m.set_step(step);
        m.set_step_time_seconds(slow);
        m.set_communication_seconds(rank == 1 ? 0 : slow - 0.1);
        ASSERT_TRUE(controller_->lifecycle().ReportProgress(id, generation, rank, m).ok());
      }
    }
  }

  std::vector<v1::JobEvent> EventsOf(const std::string& id, v1::JobEventKind kind) {
    std::vector<v1::JobEvent> found;
    for (const v1::JobEvent& e : Events(id)) {
      if (e.kind() == kind) found.push_back(e);
    }
    return found;
  }
};

TEST_F(JobControllerStragglerTest, ANonConsentingJobIsOnlyFlaggedAndUnflaggedWhenItRecovers) {
  AddNode("host-a", 1);
  AddNode("host-b", 1);
  AddNode("host-c", 1);
  std::string id = RunningJob(/*consent=*/false);
  Report(id, 0, 20, 0.3);  // slow since step 10: 10 steps
  EXPECT_TRUE(EventsOf(id, v1::JOB_EVENT_KIND_STRAGGLER).empty());
  Report(id, 20, 30, 0.3);  // 20 steps
  std::vector<v1::JobEvent> flagged = EventsOf(id, v1::JOB_EVENT_KIND_STRAGGLER);
  ASSERT_EQ(flagged.size(), 1u);
  const std::string host = MustGet(id).placement().ranks(1).hostname();
  EXPECT_EQ(flagged[0].rank(), 1);
  EXPECT_EQ(flagged[0].node_id(), MustGet(id).placement().ranks(1).node_id());
  EXPECT_EQ(flagged[0].reason(),
            "rank 1 on node " + host +
                " is a straggler: its own work per step (step time less communication) is 3.00x its peers' median "
                "since step 10 (threshold 1.30x for 20 steps); not moved (restart.move_stragglers is off)");
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(listener_.checkpoint_orders().empty());
  Report(id, 30, 40, 0.1);  // recovering since 30
  EXPECT_TRUE(EventsOf(id, v1::JOB_EVENT_KIND_STRAGGLER_RECOVERED).empty());
  Report(id, 40, 50, 0.1);
  std::vector<v1::JobEvent> recovered = EventsOf(id, v1::JOB_EVENT_KIND_STRAGGLER_RECOVERED);
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_EQ(recovered[0].reason(),
            "rank 1 on node " + host + " is no longer a straggler: 1.00x its peers' median since step 30");
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
}

TEST_F(JobControllerStragglerTest, AConsentingJobCheckpointsThenMovesOffTheNodeWhichStaysOpen) {
  AddNode("host-a", 1);
  AddNode("host-b", 1);
  AddNode("host-c", 1);
  std::string id = RunningJob(/*consent=*/true);
  const v1::RankAssignment slow = MustGet(id).placement().ranks(1);
  listener_.Clear();
  Report(id, 0, 30, 0.3);
  std::vector<v1::JobEvent> flagged = EventsOf(id, v1::JOB_EVENT_KIND_STRAGGLER);
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_TRUE(absl::StrContains(flagged[0].reason(), "; moving the job off " + slow.hostname() +
                                                         " (restart.move_stragglers): its ranks were asked for a "
                                                         "checkpoint now"))
      << flagged[0].reason();
  EXPECT_EQ(listener_.checkpoint_orders().size(), 2u);  // one per node
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);

  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(id, 40)).ok());
  v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(job.message(), "moved off node " + slow.hostname() +
                               ", where a rank is a straggler: checkpoint at step 40 written; restarting (not "
                               "counted against max_restarts)");
  ExitAll(id, 0, /*stopped_by_worker=*/true);
  controller_->Tick();
  job = MustGet(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_STARTING);
  EXPECT_EQ(job.restarts(), 0);
  for (const v1::RankAssignment& r : job.placement().ranks()) EXPECT_NE(r.node_id(), slow.node_id());
  EXPECT_EQ(listener_.starts().back().resume_from->step(), 40);
  // The node is not cordoned: another job may run there.
  EXPECT_EQ(nodes_->GetNode(slow.node_id())->state(), v1::NODE_STATE_READY);
  std::string other = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA));
  controller_->Tick();
  EXPECT_EQ(MustGet(other).placement().ranks(0).node_id(), slow.node_id());
}

TEST_F(JobControllerStragglerTest, OneMovePerWindowAndNoMoveWithoutAnotherPlace) {
  AddNode("host-a", 1);
  AddNode("host-b", 1);
  std::string id = RunningJob(/*consent=*/true);  // every node is taken: nowhere else to go
  Report(id, 0, 30, 0.3);
  std::vector<v1::JobEvent> flagged = EventsOf(id, v1::JOB_EVENT_KIND_STRAGGLER);
  ASSERT_EQ(flagged.size(), 1u);
  EXPECT_TRUE(absl::StrContains(flagged[0].reason(),
                                "; stays: no other place to go (it needs 2 node(s); 1 other schedulable)"))
      << flagged[0].reason();
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);

  // With a third node it moves once; flagged again within the window, it stays.
  AddNode("host-c", 1);
  Report(id, 30, 50, 0.1);  // recovered
  Report(id, 50, 80, 0.3);  // flagged again: moves
  ASSERT_EQ(EventsOf(id, v1::JOB_EVENT_KIND_STRAGGLER).size(), 2u);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(id, 80)).ok());
  ASSERT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  ExitAll(id, 0, true);
  controller_->Tick();
  RunToRunning(id);
  Report(id, 0, 30, 0.3);
  flagged = EventsOf(id, v1::JOB_EVENT_KIND_STRAGGLER);
  ASSERT_EQ(flagged.size(), 3u);
  EXPECT_TRUE(absl::StrContains(flagged[2].reason(),
                                "; stays: it moved off a straggler's node less than 30m ago (one move per window)"))
      << flagged[2].reason();
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
}

TEST_F(JobControllerStragglerTest, AMoveWithoutACheckpointHappensAfterTheDrainTimeout) {
  AddNode("host-a", 1);
  AddNode("host-b", 1);
  AddNode("host-c", 1);
  std::string id = RunningJob(/*consent=*/true);
  Report(id, 0, 30, 0.3);
  listener_.Clear();
  AdvanceWithHeartbeats(absl::Seconds(35));
  controller_->Tick();
  EXPECT_EQ(listener_.checkpoint_orders().size(), 2u);  // asked again after 30 s
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  AdvanceWithHeartbeats(options_.drain_checkpoint_timeout);
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  std::vector<v1::JobEvent> moved = EventsOf(id, v1::JOB_EVENT_KIND_NODE_DRAINED);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_TRUE(absl::StrContains(moved[0].reason(), ", where a rank is a straggler: no checkpoint within 5m of the "
                                                   "request; moved from its newest checkpoint"))
      << moved[0].reason();
}

}  // namespace
}  // namespace ringmaster::coordinator
