// JobController: a job's goodput breakdown (goodput.h) as GetJob and
// `ringmaster describe` show it, through a failure, a checkpoint and a
// coordinator restart (the account stored with the job, or rebuilt from the
// timeline for a job stored without one), on the fake clock.
#include <string>

#include "absl/time/time.h"
#include "common/proto_time.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/store/sqlite_db.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobGoodputTest : public JobControllerFixture {
 protected:
  // Queued 10 s, starting 5 s, RUNNING 60 s, a checkpoint that took 2 s to
  // write, 30 s more, a rank fails; 5 s later the next generation runs,
  // and runs 100 s.
  std::string RunWithOneFailure() {
    std::string id = MustSubmit(MakeSpec(1, 2, v1::ResourceSpec::CUDA, 0, /*max_restarts=*/3));
    clock_.Advance(absl::Seconds(10));
    AddNode("host-a", 2);
    controller_->ScheduleNow();
    EXPECT_EQ(State(id), v1::JOB_STATE_STARTING);
    AdvanceWithHeartbeats(absl::Seconds(5));
    JoinAll(id);
    AdvanceWithHeartbeats(absl::Seconds(60));
    ShardCommit commit = CheckpointCommit(id, 100);
    commit.write_seconds = 2;
    EXPECT_TRUE(controller_->lifecycle().CommitCheckpoint(commit).ok());
    AdvanceWithHeartbeats(absl::Seconds(30));
    Exit(id, 1, 1);
    EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
    AdvanceWithHeartbeats(absl::Seconds(4));
    Exit(id, 0, -1, "", /*stopped_by_worker=*/true);
    controller_->ScheduleNow();
    EXPECT_EQ(State(id), v1::JOB_STATE_STARTING);
    AdvanceWithHeartbeats(absl::Seconds(1));
    JoinAll(id);
    EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
    AdvanceWithHeartbeats(absl::Seconds(100));
    return id;
  }
};

// RunWithOneFailure's account after a restart, its checkpoint's 2 s of
// stall counted as `stall` (the rest of them as training).
void ExpectPhasesOfTheRun(const v1::GoodputBreakdown& g, double stall) {
  EXPECT_DOUBLE_EQ(g.queued_seconds(), 10);
  EXPECT_DOUBLE_EQ(g.starting_seconds(), 5);
  EXPECT_DOUBLE_EQ(g.recomputed_seconds(), 30);
  EXPECT_DOUBLE_EQ(g.restart_seconds(), 5);
  EXPECT_DOUBLE_EQ(g.checkpoint_stall_seconds(), stall);
  EXPECT_DOUBLE_EQ(g.training_seconds(), 158 + 2 - stall);
  EXPECT_EQ(g.phase(), v1::GOODPUT_PHASE_TRAINING);
}

TEST_F(JobGoodputTest, GetJobCarriesTheBreakdownUpToNow) {
  const std::string id = RunWithOneFailure();
  const v1::GoodputBreakdown g = MustGet(id).goodput();
  EXPECT_DOUBLE_EQ(g.queued_seconds(), 10);
  EXPECT_DOUBLE_EQ(g.starting_seconds(), 5);
  EXPECT_DOUBLE_EQ(g.checkpoint_stall_seconds(), 2);
  EXPECT_DOUBLE_EQ(g.recomputed_seconds(), 30);  // RUNNING since the checkpoint, lost
  EXPECT_DOUBLE_EQ(g.restart_seconds(), 5);
  EXPECT_DOUBLE_EQ(g.training_seconds(), 58 + 100);
  EXPECT_DOUBLE_EQ(g.goodput(), 158.0 / 200);  // of the 200 s since the first placement
  EXPECT_EQ(g.phase(), v1::GOODPUT_PHASE_TRAINING);
  EXPECT_EQ(FromProtoTime(g.as_of()), clock_.Now());
  // Time goes on while nothing happens to the job: readers see it counted.
  AdvanceWithHeartbeats(absl::Seconds(20));
  EXPECT_DOUBLE_EQ(MustGet(id).goodput().training_seconds(), 178);
}

// A trainer that writes in the background sends the time training was
// blocked (stall_seconds): that, not the write, is the checkpoint stall.
TEST_F(JobGoodputTest, ABackgroundWriteCountsOnlyItsStall) {
  std::string id = MustSubmit(MakeSpec(1, 2, v1::ResourceSpec::CUDA, 0, /*max_restarts=*/3));
  AddNode("host-a", 2);
  controller_->ScheduleNow();
  JoinAll(id);
  AdvanceWithHeartbeats(absl::Seconds(60));
  ShardCommit commit = CheckpointCommit(id, 100);
  commit.write_seconds = 4;
  commit.stall_seconds = 0.5;
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(commit).ok());
  EXPECT_DOUBLE_EQ(MustGet(id).goodput().checkpoint_stall_seconds(), 0.5);
  // Stored with the commit's event (its own transaction, not a job update).
  Restart();
  EXPECT_DOUBLE_EQ(MustGet(id).goodput().checkpoint_stall_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(MustGet(id).goodput().training_seconds(), 59.5);
}

TEST_F(JobGoodputTest, TheEndStopsTheCount) {
  const std::string id = RunWithOneFailure();
  ExitAll(id, 0);
  ASSERT_EQ(State(id), v1::JOB_STATE_SUCCEEDED);
  AdvanceWithHeartbeats(absl::Seconds(50));
  const v1::GoodputBreakdown g = MustGet(id).goodput();
  EXPECT_EQ(g.phase(), v1::GOODPUT_PHASE_ENDED);
  EXPECT_DOUBLE_EQ(g.training_seconds(), 158);
  EXPECT_DOUBLE_EQ(g.goodput(), 158.0 / 200);
}

// The account is stored with every event: a restarted coordinator carries on
// with it, the checkpoint's stall included, and counts on from there.
TEST_F(JobGoodputTest, ARestartedCoordinatorCarriesOnWithTheStoredAccount) {
  const std::string id = RunWithOneFailure();
  const v1::GoodputBreakdown before = MustGet(id).goodput();
  Restart();
  const v1::GoodputBreakdown g = MustGet(id).goodput();
  ExpectPhasesOfTheRun(g, /*stall=*/2);
  EXPECT_DOUBLE_EQ(g.goodput(), before.goodput());
  AdvanceWithHeartbeats(absl::Seconds(20));
  EXPECT_DOUBLE_EQ(MustGet(id).goodput().training_seconds(), 178);
}

// A job an older coordinator stored (no account in its row) gets one rebuilt
// from the stored timeline, where a checkpoint's stall is not kept: it reads
// back as training.
TEST_F(JobGoodputTest, AJobStoredWithoutAnAccountIsRebuiltFromTheTimeline) {
  const std::string id = RunWithOneFailure();
  {
    absl::StatusOr<SqliteDb> raw = SqliteDb::Open(path_);
    ASSERT_TRUE(raw.ok()) << raw.status();
    ASSERT_TRUE(raw->Exec("UPDATE jobs SET goodput = NULL").ok());
  }
  Restart();
  ExpectPhasesOfTheRun(MustGet(id).goodput(), /*stall=*/0);
  // From then on it is stored again.
  ExitAll(id, 0);
  Restart();
  EXPECT_DOUBLE_EQ(MustGet(id).goodput().training_seconds(), 160);
  EXPECT_EQ(MustGet(id).goodput().phase(), v1::GOODPUT_PHASE_ENDED);
}

}  // namespace
}  // namespace ringmaster::coordinator
