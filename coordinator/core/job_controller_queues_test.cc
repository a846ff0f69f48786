// JobController with queues (docs/operations.md): Submit resolves a job's
// queue; a queue that needs its quota back preempts a borrower, checkpoint
// first, without using one of its restarts; a preempted job that writes no
// checkpoint is stopped after the grace period; the queues file can be
// replaced.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/queue_config.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

// Two teams of one GPU each, on a cluster of two one-GPU nodes.
constexpr char kTwoTeams[] = R"(
queues:
  - name: team-a
    members: [alice]
    nominal: {gpus: 1}
  - name: team-b
    members: [bob]
    nominal: {gpus: 1}
)";

class JobControllerQueuesTest : public JobControllerFixture {
 protected:
  void SetUp() override {
    absl::StatusOr<QueueConfig> queues = QueueConfig::Parse(kTwoTeams, "queues.yaml");
    ASSERT_TRUE(queues.ok()) << queues.status();
    options_.queues = *queues;
    JobControllerFixture::SetUp();
  }

  absl::StatusOr<v1::Job> SubmitAs(const std::string& user, const std::string& queue, int32_t max_restarts = 3) {
    v1::JobSpec spec = MakeSpec(1, 1, v1::ResourceSpec::CUDA, 0, max_restarts);
    spec.set_queue(queue);
    return controller_->Submit(spec, {"", user, false});
  }

  std::string MustSubmitAs(const std::string& user, const std::string& queue = "", int32_t max_restarts = 3) {
    absl::StatusOr<v1::Job> job = SubmitAs(user, queue, max_restarts);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->id() : "";
  }

  // Two one-GPU nodes, both running one of alice's jobs: team-a uses its
  // own GPU and borrows team-b's.
  std::pair<std::string, std::string> TeamAHoldsBothGpus(int32_t max_restarts = 3) {
    AddNode("host-a", 1);
    AddNode("host-b", 1);
    const std::string a1 = MustSubmitAs("alice", "", max_restarts);
    const std::string a2 = MustSubmitAs("alice", "", max_restarts);
    RunToRunning(a1);
    RunToRunning(a2);
    return {a1, a2};
  }
};

TEST_F(JobControllerQueuesTest, SubmitResolvesTheQueue) {
  absl::StatusOr<v1::Job> job = SubmitAs("alice", "");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->spec().queue(), "team-a");  // her default, recorded
  EXPECT_EQ(SubmitAs("alice", "team-x").status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status denied = SubmitAs("alice", "team-b").status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(), "user alice is not a member of queue team-b");
  EXPECT_EQ(SubmitAs("carol", "").status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(JobControllerQueuesTest, AQueueReclaimsItsQuotaByCheckpointFirstPreemption) {
  const auto [a1, a2] = TeamAHoldsBothGpus(/*max_restarts=*/0);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(a2, 50)).ok());
  listener_.Clear();

  // Team B submits: the borrower is asked for a checkpoint, and keeps running meanwhile.
  const std::string b = MustSubmitAs("bob");
  controller_->Tick();
  EXPECT_EQ(State(b), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(State(a1), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(State(a2), v1::JOB_STATE_RUNNING);
  std::vector<v1::JobEvent> events = Events(a2);
  ASSERT_EQ(events.back().kind(), v1::JOB_EVENT_KIND_PREEMPTION_REQUESTED);
  EXPECT_NE(events.back().reason().find("team-b"), std::string::npos) << events.back().reason();
  ASSERT_EQ(listener_.checkpoint_orders().size(), 1u);
  EXPECT_EQ(listener_.checkpoint_orders()[0].job_id, a2);
  controller_->Tick();  // no second order, no second victim
  EXPECT_EQ(listener_.checkpoint_orders().size(), 1u);
  EXPECT_EQ(State(a1), v1::JOB_STATE_RUNNING);

  // Its checkpoint stops it (no state dump), not counted as a restart.
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(a2, 70)).ok());
  v1::Job preempted = MustGet(a2);
  EXPECT_EQ(preempted.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(preempted.reason(), "Preempted");
  ASSERT_EQ(listener_.stops().size(), 1u);
  EXPECT_FALSE(listener_.stops()[0].dump_state);
  // Team B's job starts once the borrower's rank has exited; A's waits.
  controller_->Tick();
  EXPECT_EQ(State(b), v1::JOB_STATE_QUEUED);
  Exit(a2, 0, -1, "", /*stopped_by_worker=*/true);
  controller_->Tick();
  EXPECT_EQ(State(b), v1::JOB_STATE_STARTING);
  EXPECT_EQ(State(a2), v1::JOB_STATE_RESTARTING);

  // When team B is done, A's job resumes from the preemption's checkpoint with its restarts unused.
  JoinAll(b);
  ExitAll(b, 0);
  controller_->Tick();
  ASSERT_EQ(State(a2), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(a2).restarts(), 0);
  ASSERT_TRUE(listener_.starts().back().resume_from.has_value());
  EXPECT_EQ(listener_.starts().back().resume_from->step(), 70);
  EXPECT_EQ(Timeline(a2),
            "SUBMITTED:QUEUED PLACED:PLACED STARTING:STARTING RUNNING:RUNNING CHECKPOINT_COMMITTED:RUNNING "
            "PREEMPTION_REQUESTED:RUNNING CHECKPOINT_COMMITTED:RUNNING PREEMPTED:RESTARTING RESTARTING:STARTING");
}

TEST_F(JobControllerQueuesTest, APreemptedJobWithoutACheckpointStopsAfterTheGracePeriod) {
  const auto [a1, a2] = TeamAHoldsBothGpus();
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(CheckpointCommit(a2, 20)).ok());
  const std::string b = MustSubmitAs("bob");
  controller_->Tick();
  ASSERT_EQ(Events(a2).back().kind(), v1::JOB_EVENT_KIND_PREEMPTION_REQUESTED);
  AdvanceWithHeartbeats(options_.preemption_grace - absl::Seconds(5));
  controller_->Tick();
  EXPECT_EQ(State(a2), v1::JOB_STATE_RUNNING);
  AdvanceWithHeartbeats(absl::Seconds(10));
  controller_->Tick();
  EXPECT_EQ(State(a2), v1::JOB_STATE_RESTARTING);
  const v1::JobEvent stopped = Events(a2).back();
  EXPECT_EQ(stopped.kind(), v1::JOB_EVENT_KIND_PREEMPTED);
  EXPECT_NE(stopped.reason().find("no checkpoint within the grace period of 5m"), std::string::npos)
      << stopped.reason();
  Exit(a2, 0, -1, "", true);
  controller_->Tick();
  EXPECT_EQ(State(b), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(a2).restarts(), 0);
}

TEST_F(JobControllerQueuesTest, QueueLoadsAndReplacedQueues) {
  const auto [a1, a2] = TeamAHoldsBothGpus();
  MustSubmitAs("alice");  // waits: nothing is free
  std::map<std::string, Dispatcher::QueueLoad> loads = controller_->QueueLoads();
  EXPECT_EQ(loads["team-a"].used.gpus, 2);
  EXPECT_EQ(loads["team-a"].running_jobs, 2);
  EXPECT_EQ(loads["team-a"].waiting_jobs, 1);
  EXPECT_EQ(loads["team-b"].used.gpus, 0);
  // Fair-share usage grows with what the queue holds.
  AdvanceWithHeartbeats(absl::Seconds(60));
  controller_->Tick();
  EXPECT_GT(controller_->queues().DecayedUsage("team-a"), 100);
  EXPECT_EQ(controller_->queues().DecayedUsage("team-b"), 0);

  // A new file: bob joins team-a.
  absl::StatusOr<QueueConfig> next = QueueConfig::Parse(R"(
queues:
  - name: team-a
    members: [alice, bob]
    nominal: {gpus: 2}
)", "queues.yaml");
  ASSERT_TRUE(next.ok()) << next.status();
  controller_->ReplaceQueues(*next);
  EXPECT_TRUE(SubmitAs("bob", "team-a").ok());
  EXPECT_EQ(SubmitAs("bob", "team-b").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(JobControllerQueuesTest, FairShareUsageOutlivesARestart) {
  AddNode("host-a", 1);
  const std::string a = MustSubmitAs("alice");
  RunToRunning(a);
  AdvanceWithHeartbeats(absl::Minutes(10));
  controller_->Tick();
  const double before = controller_->queues().DecayedUsage("team-a");
  EXPECT_NEAR(before, 600, 5);  // one GPU for 10 minutes, a 7-day half-life
  Restart();
  // Seeded from the store's placement (still held: counted up to now).
  EXPECT_NEAR(controller_->queues().DecayedUsage("team-a"), before, 5);
  EXPECT_EQ(controller_->queues().DecayedUsage("team-b"), 0);
}

}  // namespace
}  // namespace ringmaster::coordinator
