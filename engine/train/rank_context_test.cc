#include "engine/train/rank_context.h"

#include <unistd.h>

#include <fstream>

#include "google/protobuf/util/json_util.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

// Rank 5 of a data 2 x pipeline 4 job on 2 nodes of 4 ranks, as a worker
// writes it.
v1::RankContext WorkerContext() {
  v1::RankContext c;
  c.set_job_id("j-3");
  c.set_generation(2);
  c.mutable_spec()->mutable_parallelism()->set_data(2);
  c.mutable_spec()->mutable_parallelism()->set_pipeline(4);
  c.mutable_rank()->set_global_rank(5);
  c.mutable_rank()->set_local_rank(1);
  c.mutable_rank()->set_node_rank(1);
  c.mutable_rank()->set_data_rank(1);
  c.mutable_rank()->set_pipeline_rank(1);
  c.mutable_world()->set_world_size(8);
  c.mutable_world()->set_data(2);
  c.mutable_world()->set_pipeline(4);
  c.mutable_world()->set_nodes(2);
  c.mutable_world()->set_ranks_per_node(4);
  c.mutable_rendezvous()->set_address("grpc:unix:/run/agent.sock");
  c.set_agent("unix:/run/agent.sock");
  c.set_checkpoint_dir("/ckpt/j-3/gen-2");
  c.add_checkpoint_roots("/shared");
  c.add_checkpoint_roots("/ckpt");
  c.set_data_root("/data");
  return c;
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(RankContextTest, AWorkersContextIsReadBack) {
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(WorkerContext(), &json).ok());
  absl::StatusOr<v1::RankContext> read = ReadRankContext(Write("rank.json", json));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->rank().global_rank(), 5);
  EXPECT_EQ(read->rank().pipeline_rank(), 1);
  EXPECT_EQ(read->checkpoint_dir(), "/ckpt/j-3/gen-2");
  EXPECT_EQ(read->checkpoint_roots(1), "/ckpt");
  EXPECT_EQ(read->data_root(), "/data");
}

TEST(RankContextTest, ErrorsNameTheFileAndTheField) {
  EXPECT_EQ(ReadRankContext("/nonexistent/rank.json").status().code(), absl::StatusCode::kNotFound);
  const std::string garbled = Write("garbled.json", "{\"job_id\": 7");
  EXPECT_EQ(ReadRankContext(garbled).status().code(), absl::StatusCode::kInvalidArgument);
  v1::RankContext c = WorkerContext();
  c.mutable_rank()->set_pipeline_rank(2);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(c, &json).ok());
  const std::string path = Write("wrong.json", json);
  absl::Status status = ReadRankContext(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "rank context " + path +
                                  ": rank: global_rank 5 sits at data_rank 1, pipeline_rank 1 of a pipeline of 4, "
                                  "got 1, 2");
}

TEST(RankContextTest, InconsistentContextsAreRefused) {
  struct Case {
    void (*change)(v1::RankContext&);
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::RankContext& c) { c.clear_job_id(); }, "job_id: must not be empty"},
      {[](v1::RankContext& c) { c.mutable_world()->set_data(3); },
       "world: data (3) x pipeline (4) and nodes (2) x ranks_per_node (4) must both equal world_size (8)"},
      {[](v1::RankContext& c) { c.mutable_rank()->set_global_rank(8); }, "rank.global_rank: must be in [0, 8), got 8"},
      {[](v1::RankContext& c) { c.mutable_rank()->set_local_rank(2); },
       "rank: node_rank 1 x ranks_per_node 4 + local_rank 2 must be global_rank 5"},
      {[](v1::RankContext& c) { c.mutable_spec()->mutable_parallelism()->set_data(1); },
       "spec.parallelism: data 1 x pipeline 4 is not the world's 2 x 4"},
      {[](v1::RankContext& c) { c.mutable_rendezvous()->clear_address(); },
       "rendezvous.address: required for more than one rank"},
      {[](v1::RankContext& c) { c.mutable_rendezvous()->set_address("udp:x"); },
       "rendezvous.address: expected grpc:ADDRESS, file:DIR or tcp:HOST:PORT, got \"udp:x\""},
      {[](v1::RankContext& c) { c.set_checkpoint_dir("ckpt"); }, "checkpoint_dir: must be absolute, got \"ckpt\""},
      {[](v1::RankContext& c) { c.set_checkpoint_dir("/ckpt/../etc/j-3/gen-2"); },
       "checkpoint_dir: \"/ckpt/../etc/j-3/gen-2\" is not beneath any of checkpoint_roots"},
      {[](v1::RankContext& c) { c.set_checkpoint_roots(0, "shared"); },
       "checkpoint_roots[0]: must be absolute, got \"shared\""},
      {[](v1::RankContext& c) { c.set_data_root("data"); }, "data_root: must be absolute, got \"data\""},
      {[](v1::RankContext& c) { c.set_generation(0); }, "generation: must be >= 1 under a worker, got 0"},
  };
  ASSERT_TRUE(ValidateRankContext(WorkerContext()).ok());
  for (const Case& test : cases) {
    v1::RankContext c = WorkerContext();
    test.change(c);
    absl::Status status = ValidateRankContext(c);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << test.message;
    EXPECT_EQ(status.message(), test.message);
  }
}

TEST(RankContextTest, CommittedFilesAreTheCoordinatorsRecordOfEveryShard) {
  v1::CheckpointInfo info;
  for (int stage = 0; stage < 2; ++stage) {
    v1::CheckpointFile* f = info.add_shards()->add_files();
    f->set_path(absl::StrCat("stage-", stage, ".safetensors"));
    f->set_size_bytes(10 + stage);
    f->mutable_checksum()->set_algorithm(stage == 0 ? v1::FileChecksum::SHA256 : v1::FileChecksum::CRC32);
    f->mutable_checksum()->set_hex(stage == 0 ? std::string(64, 'a') : "0badf00d");
  }
  const std::vector<ManifestEntry> files = CommittedFiles(info);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "stage-0.safetensors");
  EXPECT_EQ(files[0].size, 10);
  EXPECT_EQ(files[0].sha256, std::string(64, 'a'));
  EXPECT_EQ(files[1].sha256, "");  // not a SHA-256: never verifies
}

v1::JobSpec Spec(int data, int pipeline, int ranks_per_node = 1) {
  v1::JobSpec spec;
  spec.mutable_parallelism()->set_data(data);
  spec.mutable_parallelism()->set_pipeline(pipeline);
  spec.mutable_resources()->set_ranks_per_node(ranks_per_node);
  spec.mutable_resources()->set_device(v1::ResourceSpec::CPU);
  return spec;
}

TEST(RankContextTest, ByHandTheCoordinatesFollowTheSharedLayout) {
  HandStartedRank hand;
  hand.rank = 3;
  hand.world_size = 4;
  hand.rendezvous = "file:/tmp/rdzv";
  absl::StatusOr<v1::RankContext> c = RankContextForHandStart(Spec(1, 2), hand);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->job_id(), "local");
  EXPECT_EQ(c->world().data(), 2) << "data follows the world: 4 ranks / 2 stages";
  EXPECT_EQ(c->spec().parallelism().data(), 2);
  EXPECT_EQ(c->rank().data_rank(), 1);
  EXPECT_EQ(c->rank().pipeline_rank(), 1);
  EXPECT_EQ(c->rank().local_rank(), 3);
  EXPECT_EQ(c->device().kind(), v1::RankDevice::CPU);
  EXPECT_TRUE(c->agent().empty());
  EXPECT_EQ(CudaOrdinal(*c), 3);
}

TEST(RankContextTest, ByHandAcrossNodesTheLocalRankPlacesTheRank) {
  HandStartedRank hand;
  hand.rank = 5;
  hand.world_size = 8;
  hand.local_rank = 1;
  hand.rendezvous = "tcp:10.0.0.1:29500";
  absl::StatusOr<v1::RankContext> c = RankContextForHandStart(Spec(8, 1, 4), hand);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->world().nodes(), 2);
  EXPECT_EQ(c->rank().node_rank(), 1);
  EXPECT_EQ(CudaOrdinal(*c), 1);
  hand.local_rank = 2;
  EXPECT_EQ(RankContextForHandStart(Spec(8, 1, 4), hand).status().message(),
            "local rank: rank 5 of 8 on nodes of 4 ranks (resources.ranks_per_node) cannot be local rank 2");
}

TEST(RankContextTest, ByHandOneProcessKeepsTheSpecsLayout) {
  HandStartedRank hand;
  hand.pinned_gpu = "GPU-1234";
  absl::StatusOr<v1::RankContext> c = RankContextForHandStart(Spec(2, 2), hand);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->world().world_size(), 1);
  EXPECT_EQ(c->spec().parallelism().data(), 2) << "one process emulates the replicas' ghost batches";
  EXPECT_EQ(CudaOrdinal(*c), 0) << "a pinned GPU is device 0";
}

TEST(RankContextTest, ByHandBadStartsAreRefusedByName) {
  HandStartedRank hand;
  hand.rank = 4;
  hand.world_size = 4;
  EXPECT_EQ(RankContextForHandStart(Spec(1, 1), hand).status().message(), "rank: must be in [0, 4), got 4");
  hand.rank = 0;
  EXPECT_EQ(RankContextForHandStart(Spec(1, 1), hand).status().message(),
            "rendezvous: required with more than one rank (--rendezvous file:DIR or tcp:HOST:PORT, or "
            "RINGMASTER_RENDEZVOUS)");
  hand.rendezvous = "file:/tmp/x";
  EXPECT_EQ(RankContextForHandStart(Spec(1, 3), hand).status().message(),
            "parallelism.pipeline: 3 stages do not divide the 4 ranks");
}

}  // namespace
}  // namespace ringmaster::engine
