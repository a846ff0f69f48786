// JobController: the contract with the ranks of a generation:
// whole-model checkpoints of pipeline jobs, damaged checkpoints, failures no
// restart can fix, checkpoint roots, and each node's slice of the placement.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/exit_codes.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobControllerContractTest : public JobControllerFixture {
 protected:
  // Rank 0's whole-model commit of the job's current generation.
  ShardCommit WholeModel(const std::string& id, int64_t step) {
    const v1::Job job = MustGet(id);
    ShardCommit c;
    c.job_id = id;
    c.generation = job.generation();
    c.step = step;
    c.path = absl::StrFormat("/ckpt/%s/gen-%d/step-%09d", id, job.generation(), step);
    c.pipeline_stages = job.spec().parallelism().pipeline();
    c.whole_model = true;
    c.files.resize(1);
    c.files[0].set_path("model.safetensors");
    c.files[0].set_size_bytes(100);
    c.files[0].mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
    c.files[0].mutable_checksum()->set_hex("12345678");
    return c;
  }

  std::string PipelineJob(int max_restarts = 3) {
    v1::JobSpec spec = MakeSpec(1, 2, v1::ResourceSpec::CUDA, 0, max_restarts);
    spec.mutable_parallelism()->set_pipeline(2);
    spec.mutable_parallelism()->set_micro_batches(2);
    spec.mutable_checkpoint()->set_keep(2);
    return MustSubmit(spec);
  }

  DamagedCheckpoint Damaged(const std::string& id, const v1::CheckpointInfo& checkpoint, int32_t rank = 1) {
    return {id, MustGet(id).generation(), rank, checkpoint.generation(), checkpoint.step(), "sha256 mismatch"};
  }
};

// A pipeline job: its rank 0 commits the whole
// model once; that completes the checkpoint, which the next generation
// resumes from.
TEST_F(JobControllerContractTest, AWholeModelCommitCompletesAPipelineCheckpoint) {
  AddNode("host-a", 2);
  const std::string id = PipelineJob();
  RunToRunning(id);
  absl::StatusOr<CommitResult> result = controller_->lifecycle().CommitCheckpoint(WholeModel(id, 20));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->completed);
  EXPECT_TRUE(result->checkpoint.whole_model());
  EXPECT_EQ(result->checkpoint.pipeline_stages(), 2);
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(id)->step(), 20);

  // A stage's shard cannot join a whole-model checkpoint, nor another rank
  // commit the whole model.
  ShardCommit stage1 = WholeModel(id, 20);
  stage1.whole_model = false;
  stage1.pipeline_stage = 1;
  stage1.rank = 1;
  EXPECT_EQ(controller_->lifecycle().CommitCheckpoint(stage1).status().code(), absl::StatusCode::kInvalidArgument);
  ShardCommit not_rank0 = WholeModel(id, 40);
  not_rank0.rank = 1;
  EXPECT_EQ(controller_->lifecycle().CommitCheckpoint(not_rank0).status().message(),
            "rank: only data-parallel rank 0 of stage 0 (global rank 0) commits its shard, got rank 1");

  Exit(id, 1, -1, "", false);
  Exit(id, 0, -1, "", true);
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  const StartOrder start = listener_.starts().back();
  ASSERT_TRUE(start.resume_from.has_value());
  EXPECT_EQ(start.resume_from->step(), 20);
  EXPECT_EQ(start.checkpoint_dir, absl::StrCat("/ckpt/", id, "/gen-2"));
}

// A rank that cannot read the checkpoint it was given back reports it: the
// checkpoint is marked damaged (listed as such, never offered again), and
// the generation restarts from the one before, without using a restart.
TEST_F(JobControllerContractTest, ADamagedCheckpointRestartsFromTheOneBeforeForFree) {
  AddNode("host-a", 2);
  const std::string id = PipelineJob(/*max_restarts=*/1);
  RunToRunning(id);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(WholeModel(id, 20)).ok());
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(WholeModel(id, 40)).ok());
  // A crash uses the one restart there is: generation 2 resumes from step 40.
  Exit(id, 1, 1);
  Exit(id, 0, -1, "", true);
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  ASSERT_EQ(MustGet(id).restarts(), 1);
  ASSERT_EQ(listener_.starts().back().resume_from->step(), 40);
  const v1::CheckpointInfo step40 = *listener_.starts().back().resume_from;

  listener_.Clear();
  ASSERT_TRUE(controller_->lifecycle().ReportDamagedCheckpoint(Damaged(id, step40, 1)).ok());
  v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(job.reason(), "CheckpointDamaged");
  EXPECT_EQ(job.message(),
            "rank 1 cannot resume from the checkpoint at step 40 (generation 1): sha256 mismatch; the next generation "
            "resumes from step 20; restarting (not counted against max_restarts)");
  std::vector<v1::JobEvent> events = Events(id);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2].kind(), v1::JOB_EVENT_KIND_CHECKPOINT_DAMAGED);
  EXPECT_EQ(events[events.size() - 2].reason(), "checkpoint at step 40 (generation 1) is damaged (rank 1): sha256 mismatch");
  // The same report from another rank changes nothing more.
  EXPECT_EQ(controller_->lifecycle().ReportDamagedCheckpoint(Damaged(id, step40, 0)).code(),
            absl::StatusCode::kFailedPrecondition);

  std::vector<v1::CheckpointInfo> listed = *controller_->lifecycle().ListCheckpoints(id, false);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].step(), 40);
  EXPECT_EQ(listed[0].damage(), "sha256 mismatch");
  EXPECT_TRUE(listed[1].damage().empty());
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(id)->step(), 20);

  ExitAll(id, 1);
  controller_->Tick();
  job = MustGet(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_STARTING);
  EXPECT_EQ(job.restarts(), 1) << "a damaged checkpoint is never fatal, even with no restarts left";
  EXPECT_EQ(listener_.starts().back().resume_from->step(), 20);

  // Damage survives a coordinator restart.
  Restart();
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(id)->step(), 20);
  EXPECT_EQ((*controller_->lifecycle().ListCheckpoints(id, false))[0].damage(), "sha256 mismatch");
}

TEST_F(JobControllerContractTest, WhenNoGoodCheckpointIsLeftTheJobStartsOver) {
  AddNode("host-a", 2);
  const std::string id = PipelineJob();
  RunToRunning(id);
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(WholeModel(id, 20)).ok());
  Exit(id, 0, 1);
  ExitAll(id, -1, true);
  controller_->Tick();
  const v1::CheckpointInfo step20 = *listener_.starts().back().resume_from;
  ASSERT_TRUE(controller_->lifecycle().ReportDamagedCheckpoint(Damaged(id, step20)).ok());
  EXPECT_TRUE(absl::StrContains(MustGet(id).message(), "no good checkpoint is left: the next generation starts from step 0"));
  ExitAll(id, 1);
  controller_->Tick();
  EXPECT_FALSE(listener_.starts().back().resume_from.has_value());
  EXPECT_EQ(controller_->lifecycle().ReportDamagedCheckpoint(Damaged(id, step20)).code(), absl::StatusCode::kOk)
      << "known and already damaged: nothing to do";
  v1::CheckpointInfo unknown = step20;
  unknown.set_step(999);
  EXPECT_EQ(controller_->lifecycle().ReportDamagedCheckpoint(Damaged(id, unknown)).code(), absl::StatusCode::kNotFound);
}

// A trainer that exits kExitUnrecoverable (its spec, or a request the
// coordinator refused as INVALID_ARGUMENT) ends the job at once.
TEST_F(JobControllerContractTest, AnUnrecoverableExitFailsTheJobAtOnce) {
  AddNode("host-a", 2);
  const std::string id = MustSubmit(MakeSpec(1, 2));
  RunToRunning(id);
  Exit(id, 0, kExitUnrecoverable, "ringmaster-trainer: commit of checkpoint /ckpt/x: pipeline_stages: bad\n");
  const v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.reason(), "Unrecoverable");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.message(), "rank 0 on host-a exited with code 78: ringmaster-trainer: commit of checkpoint /ckpt/x: "
                           "pipeline_stages: bad; not restarted: a restart cannot fix this");
}

TEST_F(JobControllerContractTest, AWorkerThatRefusesTheSpecFailsTheJobAtOnce) {
  const std::string node = AddNode("host-a", 2);
  const std::string id = MustSubmit(MakeSpec(1, 2));
  controller_->ScheduleNow();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  ASSERT_TRUE(controller_->lifecycle()
                  .ReportStartFailure({node, id, 1, "data.path: /etc/shadow is outside this node's data roots", true})
                  .ok());
  const v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.message(),
            "the worker on host-a could not start its ranks: data.path: /etc/shadow is outside this node's data "
            "roots; not restarted: a restart cannot fix this");
  // No rank started: the GPUs are free again at once.
  EXPECT_EQ(nodes_->GetNode(node)->free_gpus(), 2);
  // A start failure that a restart may fix (a full disk) restarts.
  const std::string other = MustSubmit(MakeSpec(1, 2));
  controller_->ScheduleNow();
  ASSERT_TRUE(
      controller_->lifecycle().ReportStartFailure({node, other, 1, "cannot create /x: No space left", false}).ok());
  EXPECT_EQ(State(other), v1::JOB_STATE_RESTARTING);
  // A report for a generation that is over is ignored.
  ASSERT_TRUE(controller_->lifecycle().ReportStartFailure({node, other, 0, "late", true}).ok());
  EXPECT_EQ(State(other), v1::JOB_STATE_RESTARTING);
}

TEST_F(JobControllerContractTest, AJobsEnvNamesMustBeOnesTheOperatorAllows) {
  v1::JobSpec spec = MakeSpec(1, 1);
  (*spec.mutable_env())["NCCL_DEBUG"] = "INFO";
  (*spec.mutable_env())["CUDA_LAUNCH_BLOCKING"] = "1";
  EXPECT_TRUE(controller_->Submit(spec, {}).ok());  // the default: the built-in list
  v1::JobSpec preload = spec;
  (*preload.mutable_env())["LD_PRELOAD"] = "/tmp/evil.so";
  absl::Status refused = controller_->Submit(preload, {}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "env.LD_PRELOAD: configures the dynamic loader: it loads code (matches LD_*); no pattern admits such a "
            "variable, only the operator naming it exactly (ringmaster-coordinator --allowed-env LD_PRELOAD) after "
            "deciding that every job may do that");
  (*spec.mutable_env())["NCCL_SOME_FUTURE_KNOB"] = "1";
  refused = controller_->Submit(spec, {}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "env.NCCL_SOME_FUTURE_KNOB: not a variable this coordinator lets jobs set (allowed: the built-in "
            "NCCL/CUDA tuning variables (docs/security.md)); ask the operator to allow it (ringmaster-coordinator "
            "--allowed-env)");
}

TEST_F(JobControllerContractTest, CheckpointDirectoriesLieInAllowedRootsOneJobEach) {
  v1::JobSpec outside = MakeSpec(1, 1);
  outside.mutable_checkpoint()->set_directory("/home/alice/other-job");
  absl::Status refused = controller_->Submit(outside, {}).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "checkpoint.directory: /home/alice/other-job is not within a checkpoint root this coordinator allows "
            "(/ckpt); leave it out to use the coordinator's own, or ask the operator to allow it "
            "(ringmaster-coordinator --checkpoint-allowed-roots)");
  v1::JobSpec escape = MakeSpec(1, 1);
  escape.mutable_checkpoint()->set_directory("/ckpt/../etc");
  EXPECT_EQ(controller_->Submit(escape, {}).status().code(), absl::StatusCode::kInvalidArgument);

  AddNode("host-a", 2);
  v1::JobSpec inside = MakeSpec(1, 1);
  inside.mutable_checkpoint()->set_directory("/ckpt/team-a/");
  const std::string a = MustSubmit(inside);
  const std::string b = MustSubmit(inside);
  controller_->ScheduleNow();
  std::vector<std::string> dirs;
  for (const StartOrder& o : listener_.starts()) dirs.push_back(o.checkpoint_dir);
  EXPECT_EQ(dirs, (std::vector<std::string>{absl::StrCat("/ckpt/team-a/", a, "/gen-1"),
                                            absl::StrCat("/ckpt/team-a/", b, "/gen-1")}));
  EXPECT_EQ(listener_.starts()[0].checkpoint_roots, std::vector<std::string>{"/ckpt"});

  // The coordinator decides each checkpoint's directory: a commit for job a
  // that names another (b's, through "..") is PERMISSION_DENIED and recorded
  // nowhere; its own is accepted.
  ShardCommit forged = CheckpointCommit(a, 10);
  forged.path = absl::StrCat("/ckpt/team-a/", a, "/../", b, "/gen-1/step-000000010");
  absl::Status denied = controller_->lifecycle().CommitCheckpoint(forged).status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(denied.message(), absl::StrCat("goes to \"/ckpt/team-a/", a, "/gen-1/step-000000010\"")))
      << denied;
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(b).status().code(), absl::StatusCode::kNotFound);
  ShardCommit own = CheckpointCommit(a, 10);
  own.path = absl::StrCat("/ckpt/team-a/", a, "/gen-1/step-000000010");
  ASSERT_TRUE(controller_->lifecycle().CommitCheckpoint(own).ok());
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint(a)->path(), own.path);
}

// Each node receives only its own ranks of the placement.
TEST_F(JobControllerContractTest, EachNodeReceivesItsSliceOfThePlacement) {
  const std::string a = AddNode("host-a", 4);
  const std::string b = AddNode("host-b", 4);
  const std::string id = MustSubmit(MakeSpec(2, 4));
  controller_->ScheduleNow();
  ASSERT_EQ(listener_.starts().size(), 2u);
  for (const StartOrder& order : listener_.starts()) {
    EXPECT_EQ(order.placement.world_size(), 8);
    EXPECT_EQ(order.placement.nodes(), 2);
    ASSERT_EQ(order.placement.ranks_size(), 4) << order.node_id;
    for (const v1::RankAssignment& r : order.placement.ranks()) EXPECT_EQ(r.node_id(), order.node_id);
    EXPECT_EQ(order.global_ranks.size(), 4u);
  }
  // So does a node whose session opens later.
  std::vector<StartOrder> again = Assignments(b);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].placement.ranks_size(), 4);
  EXPECT_EQ(again[0].placement.ranks(0).global_rank(), 4);
  EXPECT_EQ(MustGet(id).placement().ranks_size(), 8) << "the coordinator keeps the whole placement";
  (void)a;
}

}  // namespace
}  // namespace ringmaster::coordinator
