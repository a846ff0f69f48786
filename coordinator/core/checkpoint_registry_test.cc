#include "coordinator/core/checkpoint_registry.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/proto_time.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

v1::CheckpointFile File(const std::string& path, int64_t size, const std::string& hex = "0badf00d") {
  v1::CheckpointFile f;
  f.set_path(path);
  f.set_size_bytes(size);
  f.mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
  f.mutable_checksum()->set_hex(hex);
  return f;
}

// Where the coordinator puts job j-1's generation `gen` (JobLifecycle::CheckpointDir).
std::string GenDir(int64_t gen) { return absl::StrCat("/ckpt/j-1/gen-", gen); }
std::string StepPath(int64_t gen, int64_t step) { return absl::StrFormat("/ckpt/j-1/gen-%d/step-%09d", gen, step); }

ShardCommit Commit(int64_t gen, int64_t step, int stage = 0, int stages = 1) {
  ShardCommit c;
  c.job_id = "j-1";
  c.generation = gen;
  c.step = step;
  c.path = StepPath(gen, step);
  c.rank = stage;
  c.pipeline_stage = stage;
  c.pipeline_stages = stages;
  c.files = {File(absl::StrCat("stage-", stage, "/model.safetensors"), 1000), File("meta.json", 24)};
  return c;
}

v1::JobEvent CommittedEvent(int64_t step) {
  v1::JobEvent e;
  e.set_kind(v1::JOB_EVENT_KIND_CHECKPOINT_COMMITTED);
  e.set_from_state(v1::JOB_STATE_RUNNING);
  e.set_to_state(v1::JOB_STATE_RUNNING);
  e.set_reason(absl::StrCat("checkpoint at step ", step));
  e.set_rank(-1);
  return e;
}

class CheckpointRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::NewTempDir("ckpt") + "/rm.db";
    Reopen();
  }
  void Reopen() {
    registry_.reset();
    store_.reset();
    store_ = *Store::Open({path_});
    registry_ = std::make_unique<CheckpointRegistry>(&clock_, store_.get());
    ASSERT_TRUE(registry_->Recover().ok());
  }
  CommitResult MustCommit(const ShardCommit& c, int keep = 3) {
    absl::StatusOr<CommitResult> r = registry_->Commit(c, GenDir(c.generation), keep, CommittedEvent(c.step));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommitResult{};
  }

  FakeClock clock_;
  std::string path_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<CheckpointRegistry> registry_;
};

TEST_F(CheckpointRegistryTest, SingleStageCommitIsCompleteAndResumable) {
  EXPECT_EQ(registry_->Latest("j-1").status().code(), absl::StatusCode::kNotFound);
  CommitResult r = MustCommit(Commit(1, 100));
  EXPECT_TRUE(r.completed);
  EXPECT_FALSE(r.duplicate);
  EXPECT_TRUE(r.prune_paths.empty());
  EXPECT_TRUE(r.checkpoint.complete());
  EXPECT_EQ(r.checkpoint.total_bytes(), 1024);
  EXPECT_EQ(r.checkpoint.shards_size(), 1);
  EXPECT_EQ(FromProtoTime(r.checkpoint.commit_time()), clock_.Now());
  ASSERT_TRUE(r.event.has_value());
  EXPECT_EQ(r.event->sequence(), 1);
  EXPECT_EQ(store_->LoadEvents("j-1", 0)->size(), 1u);
  absl::StatusOr<v1::CheckpointInfo> latest = registry_->Latest("j-1");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step(), 100);
}

TEST_F(CheckpointRegistryTest, PipelineCheckpointIsCompleteOnlyWhenEveryStageCommitted) {
  CommitResult r0 = MustCommit(Commit(1, 100, 1, 3));
  EXPECT_FALSE(r0.completed);
  EXPECT_FALSE(r0.event.has_value());
  MustCommit(Commit(1, 100, 0, 3));
  EXPECT_EQ(registry_->Latest("j-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->List("j-1", /*include_incomplete=*/true).size(), 1u);
  EXPECT_TRUE(registry_->List("j-1", false).empty());
  CommitResult r2 = MustCommit(Commit(1, 100, 2, 3));
  EXPECT_TRUE(r2.completed);
  ASSERT_TRUE(r2.event.has_value());
  ASSERT_EQ(r2.checkpoint.shards_size(), 3);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(r2.checkpoint.shards(s).pipeline_stage(), s);
  EXPECT_EQ(r2.checkpoint.total_bytes(), 3 * 1024);
  EXPECT_EQ(registry_->Latest("j-1")->step(), 100);
  EXPECT_EQ(store_->LoadEvents("j-1", 0)->size(), 1u);  // one event, at completion
}

TEST_F(CheckpointRegistryTest, RetentionKeepsTheNewestKAndReturnsWhatToDelete) {
  EXPECT_TRUE(MustCommit(Commit(1, 100), 2).prune_paths.empty());
  EXPECT_TRUE(MustCommit(Commit(1, 200), 2).prune_paths.empty());
  CommitResult r = MustCommit(Commit(1, 300), 2);
  EXPECT_EQ(r.prune_paths, std::vector<std::string>{StepPath(1, 100)});
  std::vector<v1::CheckpointInfo> list = registry_->List("j-1", true);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].step(), 300);
  EXPECT_EQ(list[1].step(), 200);

  // A retry of the completing commit returns the same answer and writes nothing.
  absl::StatusOr<CommitResult> again = registry_->Commit(Commit(1, 300), GenDir(1), 2, CommittedEvent(300));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_TRUE(again->completed);
  EXPECT_EQ(again->prune_paths, r.prune_paths);
  EXPECT_FALSE(again->event.has_value());
  EXPECT_EQ(store_->LoadEvents("j-1", 0)->size(), 3u);
}

TEST_F(CheckpointRegistryTest, NewerGenerationWinsAndOrphansOfOldGenerationsArePruned) {
  MustCommit(Commit(1, 100));
  MustCommit(Commit(1, 200, 0, 2));  // stage 1 never commits: generation 1 crashed
  EXPECT_EQ(registry_->Latest("j-1")->generation(), 1);
  CommitResult r = MustCommit(Commit(2, 100));  // generation 2 resumed from 100 and wrote 100 again
  EXPECT_EQ(r.prune_paths, std::vector<std::string>{StepPath(1, 200)});
  absl::StatusOr<v1::CheckpointInfo> latest = registry_->Latest("j-1");
  EXPECT_EQ(latest->generation(), 2);
  EXPECT_EQ(latest->step(), 100);
  // The pruned one takes no more shards.
  absl::StatusOr<CommitResult> late = registry_->Commit(Commit(1, 200, 1, 2), GenDir(1), 3, std::nullopt);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CheckpointRegistryTest, ConflictingCommitsAreRejected) {
  MustCommit(Commit(1, 100, 0, 2));
  ShardCommit other_files = Commit(1, 100, 0, 2);
  other_files.files[0].set_size_bytes(5);
  EXPECT_EQ(registry_->Commit(other_files, GenDir(1), 3, std::nullopt).status().code(), absl::StatusCode::kAlreadyExists);
  // The coordinator's root changed between two stages' commits.
  ShardCommit other_path = Commit(1, 100, 1, 2);
  other_path.path = "/moved/j-1/gen-1/step-000000100";
  absl::Status s = registry_->Commit(other_path, "/moved/j-1/gen-1", 3, std::nullopt).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "path: the checkpoint of job j-1 at step 100 (generation 1) is at \"/ckpt/j-1/gen-1/step-000000100\", "
            "got \"/moved/j-1/gen-1/step-000000100\"");
  ShardCommit other_stages = Commit(1, 100, 1, 3);
  EXPECT_EQ(registry_->Commit(other_stages, GenDir(1), 3, std::nullopt).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CheckpointRegistryTest, MalformedCommitsNameTheField) {
  struct Case {
    std::function<void(ShardCommit&)> mutate;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](ShardCommit& c) { c.path = "relative/dir"; }, "path: must be absolute, got \"relative/dir\""},
      {[](ShardCommit& c) { c.step = -1; }, "step: must be >= 0, got -1"},
      {[](ShardCommit& c) { c.generation = 0; }, "generation: must be >= 1, got 0"},
      {[](ShardCommit& c) { c.pipeline_stages = 0; }, "pipeline_stages: must be >= 1, got 0"},
      {[](ShardCommit& c) { c.pipeline_stage = 2; c.rank = 2; c.pipeline_stages = 2; },
       "pipeline_stage: must be in [0, 2), got 2"},
      {[](ShardCommit& c) { c.rank = 4; },
       "rank: only data-parallel rank 0 of stage 0 (global rank 0) commits its shard, got rank 4"},
      {[](ShardCommit& c) { c.files.clear(); }, "files: at least one file is required"},
      {[](ShardCommit& c) { c.files[1].set_path("../etc/passwd"); },
       "files[1].path: must not contain \"..\", got \"../etc/passwd\""},
      {[](ShardCommit& c) { c.files[0].set_path("/abs"); }, "files[0].path: must be relative, got \"/abs\""},
      {[](ShardCommit& c) { c.files[0].set_path(""); }, "files[0].path: must not be empty"},
      {[](ShardCommit& c) { c.files[0].set_size_bytes(-1); }, "files[0].size_bytes: must be >= 0, got -1"},
      {[](ShardCommit& c) { c.files[0].mutable_checksum()->clear_algorithm(); },
       "files[0].checksum.algorithm: must be SHA256 or CRC32"},
      {[](ShardCommit& c) { c.files[0].mutable_checksum()->set_algorithm(v1::FileChecksum::SHA256); },
       "files[0].checksum.hex: must be 64 hex digits, got 8"},
      {[](ShardCommit& c) { c.files[0].mutable_checksum()->set_hex("0BADF00D"); },
       "files[0].checksum.hex: must be lowercase hexadecimal"},
  };
  for (const Case& c : cases) {
    ShardCommit commit = Commit(1, 100);
    c.mutate(commit);
    absl::Status s = registry_->Commit(commit, GenDir(1), 3, std::nullopt).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
  EXPECT_TRUE(registry_->List("j-1", true).empty());
}

// The attack of issue #27: a commit whose path is not exactly the directory
// the coordinator gave the generation, whatever it normalises to, is refused
// and changes nothing: no record, no event, no retention.
TEST_F(CheckpointRegistryTest, OnlyTheCoordinatorsOwnPathIsAccepted) {
  MustCommit(Commit(1, 100), 1);
  const std::vector<std::string> forged = {
      "/ckpt/j-1/../j-2/gen-1/step-000000200",  // climbs into another job
      "/ckpt/j-2/../j-1/gen-1/step-000000200",  // names this job's, through another's
      "/ckpt/j-1/gen-1/../gen-1/step-000000200",
      "/ckpt//j-1/gen-1/step-000000200",
      "/ckpt/j-1/gen-1/./step-000000200",
      "/ckpt/j-1/gen-1/step-000000200/",
      "/ckpt/j-1/gen-2/step-000000200",          // another generation's
      "/ckpt/j-1/gen-1/step-000000300",          // another step's
      "/ckpt/j-1/gen-1/step-200",                // not the layout's name
      "/ckpt/j-1/gen-1/step-000000200/inner",
      "/ckpt/j-2/gen-1/step-000000200",
      "/elsewhere",
  };
  for (const std::string& path : forged) {
    ShardCommit c = Commit(1, 200);
    c.path = path;
    absl::Status s = registry_->Commit(c, GenDir(1), 1, CommittedEvent(200)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << path;
    EXPECT_TRUE(absl::StartsWith(s.message(), absl::StrCat("path: \"", path, "\" is not where the coordinator put "
                                                           "this checkpoint: step 200 of job j-1 (generation 1) goes "
                                                           "to \"/ckpt/j-1/gen-1/step-000000200\"")))
        << s.message();
  }
  ShardCommit dots = Commit(1, 200);
  dots.path = forged[0];
  EXPECT_TRUE(absl::EndsWith(registry_->Commit(dots, GenDir(1), 1, std::nullopt).status().message(),
                             "(a path with \"..\", \".\" or doubled slashes is never accepted)"));
  std::vector<v1::CheckpointInfo> list = registry_->List("j-1", true);
  ASSERT_EQ(list.size(), 1u);  // keep = 1 pruned nothing
  EXPECT_EQ(list[0].path(), StepPath(1, 100));
  EXPECT_EQ(store_->LoadEvents("j-1", 0)->size(), 1u);
  // The coordinator's own path goes through, and retention then prunes 100.
  EXPECT_EQ(MustCommit(Commit(1, 200), 1).prune_paths, std::vector<std::string>{StepPath(1, 100)});
}

TEST_F(CheckpointRegistryTest, LayoutPathsAreTheJobsOwn) {
  EXPECT_TRUE(CheckpointRegistry::IsLayoutPath("/ckpt/j-1/gen-2/step-000000300", "j-1", 2, 300));
  EXPECT_TRUE(CheckpointRegistry::IsLayoutPath("/a/b/j-1/gen-2/step-1234567890", "j-1", 2, 1234567890));
  EXPECT_FALSE(CheckpointRegistry::IsLayoutPath("/ckpt/j-1/gen-2/step-000000300", "j-11", 2, 300));
  EXPECT_FALSE(CheckpointRegistry::IsLayoutPath("/ckpt/xj-1/gen-2/step-000000300", "j-1", 2, 300));
  EXPECT_FALSE(CheckpointRegistry::IsLayoutPath("/ckpt/j-1/gen-3/step-000000300", "j-1", 2, 300));
  EXPECT_FALSE(CheckpointRegistry::IsLayoutPath("/ckpt/j-2/../j-1/gen-2/step-000000300", "j-1", 2, 300));
  EXPECT_FALSE(CheckpointRegistry::IsLayoutPath("/ckpt//j-1/gen-2/step-000000300", "j-1", 2, 300));
  EXPECT_FALSE(CheckpointRegistry::IsLayoutPath("/j-1/gen-2/step-000000300", "j-1", 2, 300));
  EXPECT_FALSE(CheckpointRegistry::IsLayoutPath("j/j-1/gen-2/step-000000300", "j-1", 2, 300));
}

// A record an older coordinator accepted with a forged path (here written to
// the store directly) is pruned from the list but never handed out for
// deletion: retention deletes only directories of the job's layout.
TEST_F(CheckpointRegistryTest, RetentionNeverHandsOutAForeignRecordForDeletion) {
  MustCommit(Commit(1, 100), 1);
  CheckpointWrite legacy;
  legacy.info.set_job_id("j-1");
  legacy.info.set_generation(1);
  legacy.info.set_step(150);
  legacy.info.set_path("/ckpt/j-1/../j-2/gen-1/step-000000150");
  legacy.info.set_pipeline_stages(1);
  legacy.info.set_whole_model(true);
  legacy.info.set_complete(true);
  legacy.shard.set_pipeline_stage(0);
  *legacy.shard.add_files() = File("model.safetensors", 10);
  *legacy.info.add_shards() = legacy.shard;
  ASSERT_TRUE(store_->CommitCheckpoint(legacy).ok());
  Reopen();
  ASSERT_EQ(registry_->List("j-1", true).size(), 2u);
  CommitResult r = MustCommit(Commit(1, 200), 1);
  EXPECT_EQ(r.prune_paths, std::vector<std::string>{StepPath(1, 100)});
  ASSERT_EQ(registry_->List("j-1", true).size(), 1u);  // both gone from the list
  EXPECT_EQ(registry_->Latest("j-1")->step(), 200);
}

TEST_F(CheckpointRegistryTest, RecoverKeepsCommittedAndPrunedCheckpoints) {
  MustCommit(Commit(1, 100), 1);
  CommitResult r = MustCommit(Commit(1, 200), 1);
  MustCommit(Commit(1, 300, 0, 2), 1);  // incomplete
  Reopen();
  std::vector<v1::CheckpointInfo> list = registry_->List("j-1", true);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].step(), 300);
  EXPECT_FALSE(list[0].complete());
  EXPECT_EQ(list[1].step(), 200);
  EXPECT_EQ(list[1].shards(0).files(0).checksum().hex(), "0badf00d");
  EXPECT_EQ(registry_->Latest("j-1")->step(), 200);
  // Idempotent across the restart too.
  absl::StatusOr<CommitResult> again = registry_->Commit(Commit(1, 200), GenDir(1), 1, std::nullopt);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->prune_paths, r.prune_paths);
  // The incomplete one can still complete.
  EXPECT_TRUE(MustCommit(Commit(1, 300, 1, 2), 1).completed);
  EXPECT_EQ(registry_->Latest("j-1")->step(), 300);
}

}  // namespace
}  // namespace ringmaster::coordinator
