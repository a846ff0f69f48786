// JobController: failures, restarts, fencing, lost nodes, deadlines,
// checkpoints and recovery after a coordinator restart.
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "common/proto_time.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobControllerFailureTest : public JobControllerFixture {
 protected:
  ShardCommit Checkpoint(const std::string& id, int64_t step, int64_t generation = -1) {
    return CheckpointCommit(id, step, generation);
  }
};

// A rank failure restarts the job from its last checkpoint in a new
// generation, up to max_restarts; then the job FAILS with the reason in the
// timeline.
TEST_F(JobControllerFailureTest, RestartsUpToMaxRestartsThenFails) {
  std::string node = AddNode("host-a", 2);
  std::string id = MustSubmit(MakeSpec(1, 2, v1::ResourceSpec::CUDA, 0, /*max_restarts=*/2));
  RunToRunning(id);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(Checkpoint(id, 100)).ok());

  for (int restart = 1; restart <= 2; ++restart) {
    SCOPED_TRACE(restart);
    const int64_t gen = MustGet(id).generation();
    listener_.Clear();
    Exit(id, 1, 1, "Traceback...\nRuntimeError: boom\n");
    v1::Job job = MustGet(id);
    ASSERT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
    EXPECT_EQ(job.reason(), "RankExited");
    EXPECT_EQ(job.message(), absl::StrCat("rank 1 on host-a exited with code 1: RuntimeError: boom; restarting (restart ",
                                          restart, " of 2)"));
    v1::JobEvent cause = Events(id).back();
    EXPECT_EQ(cause.kind(), v1::JOB_EVENT_KIND_RANK_EXITED);
    EXPECT_EQ(cause.rank(), 1);
    EXPECT_EQ(cause.node_id(), node);
    EXPECT_EQ(cause.generation(), gen);
    // The surviving rank is told to stop; it holds its GPU until it exits.
    ASSERT_EQ(listener_.stops().size(), 1u);
    EXPECT_EQ(listener_.stops()[0].generation, gen);
    EXPECT_TRUE(listener_.stops()[0].dump_state);  // a failed generation: state dump first
    EXPECT_TRUE(listener_.stops()[0].restarting);  // survivors may wait for the next generation
    EXPECT_EQ(listener_.stops()[0].reason,
              absl::StrCat("generation ", gen, " restarting: rank 1 on host-a exited with code 1: RuntimeError: boom"));
    controller_->Tick();
    EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
    EXPECT_EQ(MustGet(id).message(), "restart pending: waiting for 1 node with 2 free GPUs each; 0 such nodes now");
    Exit(id, 0, -1, "", /*stopped_by_worker=*/true);
    controller_->Tick();
    job = MustGet(id);
    ASSERT_EQ(job.state(), v1::JOB_STATE_STARTING);
    EXPECT_EQ(job.generation(), gen + 1);
    EXPECT_EQ(job.restarts(), restart);
    // The new generation resumes from the last complete checkpoint.
    ASSERT_FALSE(listener_.starts().empty());
    const StartOrder start = listener_.starts().back();
    EXPECT_EQ(start.generation, gen + 1);
    // Its own directory: a straggler of the old generation cannot overwrite it.
    EXPECT_TRUE(absl::EndsWith(start.checkpoint_dir, absl::StrCat("/gen-", gen + 1))) << start.checkpoint_dir;
    ASSERT_TRUE(start.resume_from.has_value());
    EXPECT_EQ(start.resume_from->step(), 100);
    EXPECT_EQ(Events(id).back().kind(), v1::JOB_EVENT_KIND_RESTARTING);
    EXPECT_EQ(Events(id).back().reason(),
              absl::StrCat("restart ", restart, " of 2: generation ", gen + 1, " on host-a (1 x 2 ranks); resuming from step 100"));
    JoinAll(id);
    ASSERT_EQ(State(id), v1::JOB_STATE_RUNNING);
  }
  // Out of restarts.
  listener_.Clear();
  Exit(id, 0, -1, "", false);
  v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  ASSERT_EQ(listener_.stops().size(), 1u);
  EXPECT_FALSE(listener_.stops()[0].restarting);  // over: nothing to wait for
  EXPECT_EQ(job.reason(), "RankExited");
  EXPECT_EQ(job.restarts(), 2);
  EXPECT_EQ(job.message(), "rank 0 on host-a exited with code -1; no restarts left (max_restarts 2)");
  EXPECT_TRUE(job.has_end_time());
  EXPECT_EQ(Timeline(id),
            "SUBMITTED:QUEUED PLACED:PLACED STARTING:STARTING RUNNING:RUNNING CHECKPOINT_COMMITTED:RUNNING "
            "RANK_EXITED:RESTARTING RESTARTING:STARTING RUNNING:RUNNING "
            "RANK_EXITED:RESTARTING RESTARTING:STARTING RUNNING:RUNNING "
            "RANK_EXITED:FAILED");
  EXPECT_EQ(Events(id).back().reason(), job.message());
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_FAILED);
}

TEST_F(JobControllerFailureTest, ZeroRestartsFailsAtOnce) {
  AddNode("host-a", 1);
  std::string id = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA, 0, 0));
  RunToRunning(id);
  Exit(id, 0, 0, "", /*stopped_by_worker=*/false);  // a clean exit of the only rank is success
  EXPECT_EQ(State(id), v1::JOB_STATE_SUCCEEDED);
  std::string id2 = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA, 0, 0));
  RunToRunning(id2);
  RankExit killed{MustGet(id2).placement().ranks(0).node_id(), id2, 1, 0, -1, 9, false, ""};
  ASSERT_TRUE(controller_->lifecycle().ReportRankExit(killed).ok());
  EXPECT_EQ(State(id2), v1::JOB_STATE_FAILED);
  EXPECT_EQ(MustGet(id2).message(), "rank 0 on host-a was killed by signal 9; no restarts left (max_restarts 0)");
}

// Everything from an older generation is refused or ignored.
TEST_F(JobControllerFailureTest, FencingOfAnOldGeneration) {
  AddNode("host-a", 2);
  std::string id = MustSubmit(MakeSpec(1, 2));
  RunToRunning(id);
  Exit(id, 0, 1);
  Exit(id, 1, -1, "", true);
  controller_->Tick();
  ASSERT_EQ(MustGet(id).generation(), 2);
  JoinAll(id);
  ASSERT_EQ(State(id), v1::JOB_STATE_RUNNING);
  const size_t events = Events(id).size();

  // Checkpoint commit from generation 1: FAILED_PRECONDITION, not recorded.
  absl::StatusOr<CommitResult> c = controller_->lifecycle().CommitCheckpoint(Checkpoint(id, 500, 1));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.status().message(), "generation 1 of job " + id + " is over; current is 2");
  EXPECT_TRUE(controller_->lifecycle().ListCheckpoints(id, true)->empty());
  EXPECT_EQ(controller_->lifecycle().CommitCheckpoint(Checkpoint(id, 500, 3)).status().message(),
            "generation 3 of job " + id + " is not known; current is 2");
  // Rendezvous from generation 1.
  absl::Status rdv = rendezvous_->KvSet({id, 1, 0}, "k", "v");
  EXPECT_EQ(rdv.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rdv.message(), "generation 1 of job " + id + " is over; current is 2");
  // Progress from generation 1: told to stop, not recorded.
  v1::StepMetrics m;
  m.set_step(999);
  EXPECT_EQ(*controller_->lifecycle().ReportProgress(id, 1, 0, m), true);
  EXPECT_EQ(MustGet(id).progress().step(), 0);
  // A late crash report from generation 1 changes nothing.
  RankExit late{MustGet(id).placement().ranks(0).node_id(), id, 1, 0, 1, 0, false, "late"};
  ASSERT_TRUE(controller_->lifecycle().ReportRankExit(late).ok());
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(Events(id).size(), events);
}

TEST_F(JobControllerFailureTest, LostNodeRestartsItsJobsElsewhere) {
  std::string a = AddNode("host-a", 1);
  std::string b = AddNode("host-b", 1);
  std::string c = AddNode("host-c", 1);
  std::string id = MustSubmit(MakeSpec(2, 1));
  RunToRunning(id);
  v1::Job job = MustGet(id);
  const std::string victim = job.placement().ranks(1).node_id();
  const std::string survivor = job.placement().ranks(0).node_id();
  listener_.Clear();
  // The victim misses 3 heartbeats (15 s); the others keep theirs.
  AdvanceWithHeartbeats(absl::Seconds(10), {victim});
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  AdvanceWithHeartbeats(absl::Seconds(5), {victim});
  controller_->Tick();
  job = MustGet(id);
  EXPECT_EQ(nodes_->GetNode(victim)->state(), v1::NODE_STATE_LOST);
  // RESTARTING; it cannot be placed again while the survivor's rank still
  // holds its GPU (host-c alone is not enough).
  v1::JobEvent lost = Events(id)[4];
  EXPECT_EQ(lost.kind(), v1::JOB_EVENT_KIND_NODE_LOST);
  EXPECT_EQ(lost.to_state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(lost.node_id(), victim);
  EXPECT_EQ(lost.reason(), absl::StrCat("node ", nodes_->GetNode(victim)->hostname(), " (", victim,
                                        ") lost: no heartbeat for 15s; restarting (restart 1 of 3)"));
  EXPECT_EQ(job.reason(), "NodeLost");
  // Only the survivor is told to stop; nothing is sent to the lost node.
  ASSERT_EQ(listener_.stops().size(), 1u);
  EXPECT_EQ(listener_.stops()[0].node_id, survivor);
  // Its rank is blocked in a collective with the lost node: it is stopped,
  // not left to wait for the next generation.
  EXPECT_FALSE(listener_.stops()[0].restarting);
  // Once the survivor's rank is gone, generation 2 runs on the two live nodes.
  Exit(id, 0, -1, "", true, 1);
  controller_->Tick();
  job = MustGet(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_STARTING);
  for (const v1::RankAssignment& r : job.placement().ranks()) EXPECT_NE(r.node_id(), victim);
}

// A node where the job failed twice within the cool-down (10 min) is left out
// of its placements while another node can take it; afterwards it is back.
TEST_F(JobControllerFailureTest, ANodeThatFailsTheJobTwiceIsLeftOutForTheCooldown) {
  std::string a = AddNode("host-a", 1);
  std::string b = AddNode("host-b", 1);
  std::string id = MustSubmit(MakeSpec(1, 1));
  RunToRunning(id);
  ASSERT_EQ(MustGet(id).placement().ranks(0).node_id(), a);  // best fit, ties by hostname
  Exit(id, 0, 1);
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(id).placement().ranks(0).node_id(), a);  // one failure: not yet
  JoinAll(id);
  Exit(id, 0, 1);
  EXPECT_EQ(Events(id).back().reason(),
            "rank 0 on host-a exited with code 1; node host-a is left out of this job for 10m (2 failures); "
            "restarting (restart 2 of 3)");
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(id).placement().ranks(0).node_id(), b);
  JoinAll(id);
  // After the cool-down host-a is eligible again (and preferred, by hostname).
  AdvanceWithHeartbeats(absl::Minutes(10));
  Exit(id, 0, 1);
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(id).placement().ranks(0).node_id(), a);
}

// An elastic job (min 2 of 3 nodes) that loses a node and has no spare
// continues on the 2 left: world and data-parallel size 2, in the placement
// and in the spec its ranks get.
TEST_F(JobControllerFailureTest, AnElasticJobContinuesOnFewerNodes) {
  AddNode("host-a", 1);
  AddNode("host-b", 1);
  AddNode("host-c", 1);
  v1::JobSpec spec = MakeSpec(3, 1);
  spec.mutable_data()->set_batch_size(12);
  spec.mutable_restart()->mutable_elastic()->set_min_nodes(2);
  std::string id = MustSubmit(spec);
  RunToRunning(id);
  const std::string victim = MustGet(id).placement().ranks(2).node_id();
  AdvanceWithHeartbeats(absl::Seconds(15), {victim});
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  Exit(id, 0, -1, "", /*stopped_by_worker=*/true, 1);
  Exit(id, 1, -1, "", /*stopped_by_worker=*/true, 1);
  listener_.Clear();
  controller_->Tick();
  v1::Job job = MustGet(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_STARTING) << job.message();
  EXPECT_EQ(job.placement().nodes(), 2);
  EXPECT_EQ(job.placement().world_size(), 2);
  EXPECT_EQ(job.placement().data_parallel_size(), 2);
  for (const v1::RankAssignment& r : job.placement().ranks()) EXPECT_NE(r.node_id(), victim);
  ASSERT_FALSE(listener_.starts().empty());
  EXPECT_EQ(listener_.starts().back().spec.resources().nodes(), 2);
  EXPECT_EQ(listener_.starts().back().spec.parallelism().data(), 2);
}

// A lost node that comes back with its old rank still alive: the rank is
// told to stop and keeps its GPU until it has exited.
TEST_F(JobControllerFailureTest, LostNodeThatComesBackStopsItsOldRanks) {
  std::string a = AddNode("host-a", 1);
  std::string b = AddNode("host-b", 1);
  std::string id = MustSubmit(MakeSpec(2, 1));
  RunToRunning(id);
  AdvanceWithHeartbeats(absl::Seconds(15), {b});
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  Exit(id, 0, -1, "", true, 1);  // host-a's rank obeys its stop order
  v1::NodeInfo host_b = testing::MakeNode("host-b", 1);
  host_b.set_node_id(b);
  absl::StatusOr<NodeRegistrationResult> r = controller_->reconciler().RegisterNode(host_b, {{id, 1, 1}});
  ASSERT_TRUE(r.ok()) << r.status();
  sessions_[b] = r->registration.session_id;
  ASSERT_EQ(r->stop.size(), 1u);
  EXPECT_EQ(r->stop[0].generation, 1);
  EXPECT_EQ(r->stop[0].global_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(r->stop[0].reason, "generation 1 of job " + id + " is over");
  EXPECT_EQ(nodes_->GetNode(b)->state(), v1::NODE_STATE_READY);
  EXPECT_EQ(nodes_->GetNode(b)->free_gpus(), 0);
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);  // host-b's GPU is still in use
  Exit(id, 1, -1, "", true, 1);
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(id).generation(), 2);
}

TEST_F(JobControllerFailureTest, RendezvousDeadlineFailsTheGenerationWithFakeClock) {
  AddNode("host-a", 2);
  std::string id = MustSubmit(MakeSpec(1, 2));
  controller_->ScheduleNow();
  ASSERT_TRUE(rendezvous_->CheckIn({id, 1, 0}).ok());  // rank 1 never shows up
  AdvanceWithHeartbeats(absl::Minutes(5) - absl::Seconds(5));
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_STARTING);
  AdvanceWithHeartbeats(absl::Seconds(5));
  controller_->Tick();
  v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(job.reason(), "RendezvousTimeout");
  EXPECT_EQ(Events(id).back().reason(),
            "rendezvous deadline passed; rank(s) 1 never joined; restarting (restart 1 of 3)");
}

TEST_F(JobControllerFailureTest, RankTimingOutInRendezvousFailsTheGeneration) {
  AddNode("host-a", 2);
  std::string id = MustSubmit(MakeSpec(1, 2));
  controller_->ScheduleNow();
  auto wait = std::async(std::launch::async, [&] {
    return rendezvous_->GetNcclUniqueId({id, 1, 1}, "world", absl::Seconds(20));
  });
  while (rendezvous_->Waiters() != 1) std::this_thread::yield();
  AdvanceWithHeartbeats(absl::Seconds(20));
  controller_->Tick();  // wakes the waiter; it fails the generation and reports it
  EXPECT_EQ(wait.get().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(Events(id).back().reason(),
            "rank 1 timed out after 20s waiting for the NCCL id of communicator \"world\"; restarting (restart 1 of 3)");
}

TEST_F(JobControllerFailureTest, NoProgressForTheTimeoutRestarts) {
  AddNode("host-a", 1);
  v1::JobSpec spec = MakeSpec(1, 1);
  spec.mutable_restart()->set_progress_timeout_seconds(60);
  std::string id = MustSubmit(spec);
  RunToRunning(id);
  AdvanceWithHeartbeats(absl::Seconds(40));
  ASSERT_FALSE(*controller_->lifecycle().ReportProgress(id, 1, 0, {}));
  AdvanceWithHeartbeats(absl::Seconds(55));
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  AdvanceWithHeartbeats(absl::Seconds(5));
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(MustGet(id).reason(), "ProgressTimeout");
  EXPECT_EQ(Events(id).back().reason(), "no step progress for 1m; restarting (restart 1 of 3)");
}

TEST_F(JobControllerFailureTest, CheckpointsAreCommittedForTheCurrentGenerationOnly) {
  AddNode("host-a", 2);
  v1::JobSpec spec = MakeSpec(1, 2);
  spec.mutable_parallelism()->set_pipeline(2);
  spec.mutable_checkpoint()->set_keep(1);
  std::string id = MustSubmit(spec);
  RunToRunning(id);
  ShardCommit stage0 = Checkpoint(id, 100);
  stage0.pipeline_stages = 2;
  ShardCommit stage1 = stage0;
  stage1.pipeline_stage = 1;
  stage1.rank = 1;
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(id).status().code(), absl::StatusCode::kNotFound);
  ShardCommit wrong = stage0;
  wrong.pipeline_stages = 1;
  EXPECT_EQ(controller_->lifecycle().CommitCheckpoint(wrong).status().message(),
            "pipeline_stages: job " + id + " has 2 pipeline stages, got 1");
  ASSERT_FALSE(controller_->lifecycle().CommitCheckpoint(stage0)->completed);
  listener_.Clear();
  absl::StatusOr<CommitResult> done = controller_->lifecycle().CommitCheckpoint(stage1);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->completed);
  EXPECT_EQ(MustGet(id).last_checkpoint().step(), 100);
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(id)->step(), 100);
  ASSERT_EQ(listener_.events().size(), 1u);
  EXPECT_EQ(listener_.events()[0].kind(), v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED);
  EXPECT_EQ(listener_.jobs().back().last_checkpoint().step(), 100);
  // Retention keep=1: the next one prunes it.
  stage0.step = stage1.step = 200;
  stage0.path = stage1.path = "/ckpt/" + id + "/gen-1/step-000000200";
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(stage0).ok());
  EXPECT_EQ(controller_->lifecycle().CommitCheckpoint(stage1)->prune_paths,
            std::vector<std::string>{"/ckpt/" + id + "/gen-1/step-000000100"});
}

// A coordinator restart loses no job, no queue order, no event, no
// committed checkpoint; running jobs continue, jobs caught mid-rendezvous
// start their generation again.
TEST_F(JobControllerFailureTest, CoordinatorRestartRecoversEverything) {
  std::string a = AddNode("host-a", 2);
  std::string running = MustSubmit(MakeSpec(1, 2, v1::ResourceSpec::CUDA, 9));
  RunToRunning(running);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(Checkpoint(running, 300)).ok());
  std::string b = AddNode("host-b", 1);
  std::string starting = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CUDA, 5));
  controller_->ScheduleNow();
  ASSERT_EQ(State(starting), v1::JOB_STATE_STARTING);
  std::string q1 = MustSubmit(MakeSpec(1, 2));
  std::string q2 = MustSubmit(MakeSpec(1, 1));
  std::string done = MustSubmit(MakeSpec(1, 1));
  ASSERT_TRUE(controller_->lifecycle().Cancel(done, "").ok());
  const std::vector<v1::JobEvent> running_events = Events(running);

  Restart();

  EXPECT_EQ(State(running), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(State(q1), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(State(q2), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(State(done), v1::JOB_STATE_CANCELLED);
  std::vector<v1::JobEvent> events = Events(running);
  ASSERT_EQ(events.size(), running_events.size() + 1);
  EXPECT_EQ(events.back().kind(), v1::JOB_EVENT_KIND_RECOVERED);
  EXPECT_EQ(events.back().reason(), "coordinator restarted; generation 1 continues");
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(running)->step(), 300);
  EXPECT_EQ(MustGet(running).placement().ranks_size(), 2);
  // The mid-rendezvous job starts its generation again.
  EXPECT_EQ(State(starting), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(MustGet(starting).reason(), "CoordinatorRestarted");
  // Slots of the recovered generations are held: nothing else fits on host-a.
  EXPECT_EQ(nodes_->GetNode(a)->free_gpus(), 0);
  // The running job keeps going: its ranks can still commit and report.
  EXPECT_FALSE(*controller_->lifecycle().ReportProgress(running, 1, 0, {}));
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(Checkpoint(running, 400)).ok());
  // Workers register again, reporting what survived: host-a's ranks are
  // alive; host-b's rank of the restarted generation is told to stop.
  sessions_.clear();
  AddNode("host-a", 2, 0, {}, {{running, 1, 0}, {running, 1, 1}});
  v1::NodeInfo host_b = testing::MakeNode("host-b", 1);
  absl::StatusOr<NodeRegistrationResult> rb = controller_->reconciler().RegisterNode(host_b, {{starting, 1, 0}});
  ASSERT_TRUE(rb.ok());
  ASSERT_EQ(rb->stop.size(), 1u);
  EXPECT_EQ(rb->stop[0].job_id, starting);
  EXPECT_EQ(rb->stop[0].global_ranks, std::vector<int32_t>{0});
  EXPECT_EQ(State(running), v1::JOB_STATE_RUNNING);
  // The stopped rank exits; the restarted job gets its new generation; the
  // queue resumes in order.
  Exit(starting, 0, -1, "", true, 1);
  controller_->Tick();
  EXPECT_EQ(State(starting), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(starting).generation(), 2);
  EXPECT_EQ(State(q1), v1::JOB_STATE_QUEUED);
  JoinAll(running);
  ExitAll(running, 0);
  controller_->Tick();
  EXPECT_EQ(State(q1), v1::JOB_STATE_STARTING);  // FIFO: q1 before q2 after the restart too
  EXPECT_EQ(State(q2), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(MustSubmit(MakeSpec(1, 1)), "j-6");  // ids never reused
}

TEST_F(JobControllerFailureTest, WorkerThatLostItsRanksFailsTheirGeneration) {
  AddNode("host-a", 2);
  std::string id = MustSubmit(MakeSpec(1, 2));
  RunToRunning(id);
  // The worker restarts; its children died with it.
  AddNode("host-a", 2, 0, {}, {});
  v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(Events(id).back().reason(),
            "rank 0 is not running after the worker on host-a registered again; restarting (restart 1 of 3)");
  // Their GPUs are free again: the next generation starts at once.
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_STARTING);
}

}  // namespace
}  // namespace ringmaster::coordinator
