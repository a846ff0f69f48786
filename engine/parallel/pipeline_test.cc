// PipelineStage over threads (InProcessGroup): P stages with m micro-batches
// compute the same gradients, losses and (after SGD steps) weights as one
// process on the same global batch, for GPipe and 1F1B, the MLP, the CNN and a
// GPT whose tied embedding spans the first and last stage; also with
// rendezvous (synchronous) sends, and the argument errors.

#include "engine/parallel/pipeline.h"

#include <memory>

#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "engine/dist/in_process_group.h"
#include "engine/parallel/pipeline_p2p.h"
#include "engine/parallel/testing/pipeline_test_harness.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

using testing::MaxRelDiff;
using testing::PipelineRunConfig;
using testing::RunPipeline;
using testing::RunReference;
using testing::RunResult;

constexpr double kTolerance = 1e-5;  // relative, per parameter (max |diff| / max |reference|)
constexpr int kSteps = 3;
constexpr int64_t kBatch = 16;
constexpr int kMicro = 8;

nn::ModelConfig Mlp() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kMlp;
  c.seed = 11;
  c.input_height = c.input_width = 8;
  c.hidden_sizes = {32, 24, 16};  // 4 blocks
  return c;
}

// BatchNorm normalises each micro-batch: the reference normalises the same
// groups of samples through ghost batches of the micro-batch size.
nn::ModelConfig Cnn() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kCnn;
  c.seed = 12;
  c.input_height = c.input_width = 8;
  c.conv_channels = {4, 8};
  c.cnn_hidden_sizes = {16};  // 4 blocks: conv, conv, hidden, output
  c.bn_ghost_batch = kBatch / kMicro;
  return c;
}

nn::ModelConfig Gpt() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kGpt;
  c.seed = 13;
  c.n_layer = 2;  // 4 blocks: embedding, 2 transformer layers, head (tied to the embedding)
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  c.vocab_size = 32;
  return c;
}

std::vector<Batch> Batches(const nn::ModelConfig& c, int64_t batch = kBatch) {
  std::vector<Batch> out;
  for (int k = 0; k < kSteps; ++k) {
    out.push_back(c.kind == nn::ModelKind::kGpt ? testing::RandomTokenBatch(c, batch, c.block_size, 100 + k)
                                                : testing::RandomImageBatch(c, batch, 100 + k));
  }
  return out;
}

void ExpectSameTraining(const RunResult& got, const RunResult& want) {
  std::string worst;
  EXPECT_LT(MaxRelDiff(got.first_grads, want.first_grads, &worst), kTolerance) << "gradient of " << worst;
  EXPECT_LT(MaxRelDiff(got.weights, want.weights, &worst), kTolerance) << "weight " << worst;
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t k = 0; k < want.losses.size(); ++k) EXPECT_NEAR(got.losses[k], want.losses[k], 1e-5 * want.losses[k]);
  EXPECT_EQ(got.copy_mismatch, 0.0) << "tied copies, replicas or reported losses differ";
}

struct Case {
  const char* name;
  nn::ModelConfig (*model)();
  StagePartition stages;
  ScheduleKind schedule;
  bool rendezvous;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PipelineEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEquivalenceTest, MatchesOneProcessOnTheSameGlobalBatch) {
  const Case& c = GetParam();
  nn::ModelConfig model = c.model();
  std::vector<Batch> batches = Batches(model);
  PipelineRunConfig config;
  config.model = model;
  config.stages = c.stages;
  config.schedule = c.schedule;
  config.micro_batches = kMicro;
  config.rendezvous = c.rendezvous;
  absl::StatusOr<RunResult> got = RunPipeline(config, batches);
  ASSERT_TRUE(got.ok()) << got.status();
  absl::StatusOr<RunResult> want = RunReference(model, batches, config.lr);
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectSameTraining(*got, *want);
  const int p = static_cast<int>(c.stages.size());
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(got->peak_in_flight[s], c.schedule == ScheduleKind::kGpipe ? kMicro : std::min(p - s, kMicro))
        << "stage " << s;
  }
}

const StagePartition kTwo = {{0, 2}, {2, 4}};
const StagePartition kFour = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};

INSTANTIATE_TEST_SUITE_P(
    Models, PipelineEquivalenceTest,
    ::testing::Values(Case{"MlpP2Gpipe", Mlp, kTwo, ScheduleKind::kGpipe, false},
                      Case{"MlpP2OneFOneB", Mlp, kTwo, ScheduleKind::kOneFOneB, false},
                      Case{"CnnP2Gpipe", Cnn, kTwo, ScheduleKind::kGpipe, false},
                      Case{"CnnP2OneFOneB", Cnn, kTwo, ScheduleKind::kOneFOneB, false},
                      Case{"GptP2Gpipe", Gpt, kTwo, ScheduleKind::kGpipe, false},
                      Case{"GptP2OneFOneB", Gpt, kTwo, ScheduleKind::kOneFOneB, false},
                      Case{"CnnP4Gpipe", Cnn, kFour, ScheduleKind::kGpipe, false},
                      Case{"CnnP4OneFOneB", Cnn, kFour, ScheduleKind::kOneFOneB, false},
                      Case{"GptP4Gpipe", Gpt, kFour, ScheduleKind::kGpipe, false},
                      Case{"GptP4OneFOneB", Gpt, kFour, ScheduleKind::kOneFOneB, false},
                      Case{"GptP4OneFOneBRendezvous", Gpt, kFour, ScheduleKind::kOneFOneB, true},
                      Case{"GptP4GpipeRendezvous", Gpt, kFour, ScheduleKind::kGpipe, true},
                      Case{"MlpP3UnevenOneFOneBRendezvous", Mlp, {{0, 1}, {1, 3}, {3, 4}}, ScheduleKind::kOneFOneB,
                           true},
                      Case{"GptP1Accumulation", Gpt, {{0, 4}}, ScheduleKind::kOneFOneB, false}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(PipelineTest, TiedEmbeddingGradientIsSummedAcrossFirstAndLastStage) {
  nn::ModelConfig model = Gpt();
  std::vector<Batch> batches = Batches(model);
  PipelineRunConfig config;
  config.model = model;
  config.stages = kTwo;
  config.micro_batches = 4;
  RunResult got = RunPipeline(config, batches).value();
  RunResult want = RunReference(model, batches, config.lr).value();
  // Both stages hold transformer.wte.weight; the harness checks their copies
  // agree (copy_mismatch) and the value is the full gradient (embedding + head).
  const std::vector<float>& g = got.first_grads.at("transformer.wte.weight");
  const std::vector<float>& w = want.first_grads.at("transformer.wte.weight");
  EXPECT_LT(engine::testing::MaxRelDiff(g, w), kTolerance);
  EXPECT_EQ(got.copy_mismatch, 0.0);
  EXPECT_LT(engine::testing::MaxRelDiff(got.weights.at("transformer.wte.weight"),
                                        want.weights.at("transformer.wte.weight")),
            kTolerance);
}

TEST(PipelineTest, UntiedGptHasNoTiedParameters) {
  CpuBackend backend(CpuBackendConfig{1, DType::kF32});
  nn::ModelConfig c = Gpt();
  c.tie_embeddings = false;
  auto model = nn::BuildModel(c, backend).value();
  auto world = dist::InProcessWorld::Create(1);
  auto group = world->Group(0);
  PipelineConfig pc;
  pc.stages = {{0, 4}};
  auto stage = PipelineStage::Create(*model, *group, pc).value();
  EXPECT_TRUE(stage->TiedParameters().empty());
}

class PipelineErrorsTest : public ::testing::Test {
 protected:
  CpuBackend backend_{CpuBackendConfig{1, DType::kF32}};
  std::shared_ptr<dist::InProcessWorld> world_ = dist::InProcessWorld::Create(1);
  std::unique_ptr<dist::InProcessGroup> group_ = world_->Group(0);
  std::unique_ptr<nn::Model> model_ = nn::BuildModel(Mlp(), backend_).value();
};

TEST_F(PipelineErrorsTest, PartitionMustMatchTheModelAndTheGroup) {
  PipelineConfig pc;
  pc.stages = kTwo;  // two stages, a group of one rank
  EXPECT_EQ(PipelineStage::Create(*model_, *group_, pc).status().code(), absl::StatusCode::kInvalidArgument);
  pc.stages = {{0, 3}};  // does not cover the 4 blocks
  EXPECT_EQ(PipelineStage::Create(*model_, *group_, pc).status().code(), absl::StatusCode::kInvalidArgument);
  pc.stages = {{0, 4}};
  pc.micro_batches = 0;
  EXPECT_EQ(PipelineStage::Create(*model_, *group_, pc).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PipelineErrorsTest, MicroBatchesMustDivideTheBatchAndInputsMustBeThere) {
  PipelineConfig pc;
  pc.stages = {{0, 4}};
  pc.micro_batches = 4;
  auto stage = PipelineStage::Create(*model_, *group_, pc).value();
  Batch odd = testing::RandomImageBatch(Mlp(), 10, 1);
  absl::Status s = stage->Step(odd).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("4 micro-batches do not divide a batch of 10"), std::string::npos) << s;
  Batch no_targets = testing::RandomImageBatch(Mlp(), 8, 1);
  no_targets.targets = Tensor();
  EXPECT_EQ(stage->Step(no_targets).status().code(), absl::StatusCode::kInvalidArgument);
  Batch no_inputs = testing::RandomImageBatch(Mlp(), 8, 1);
  no_inputs.images = Tensor();
  EXPECT_EQ(stage->Step(no_inputs).status().code(), absl::StatusCode::kInvalidArgument);
  // A good batch still works afterwards (validation happens before any action).
  absl::StatusOr<PipelineStepResult> ok = stage->Step(testing::RandomImageBatch(Mlp(), 8, 1));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_GT(ok->loss, 0.0f);
}

TEST(PipelineP2pTest, ActivationsCarryTheirShapeAndBadHeadersAreRejected) {
  auto world = dist::InProcessWorld::Create(2);
  auto sender = world->Group(0);
  auto receiver = world->Group(1);
  CpuBackend backend(CpuBackendConfig{1, DType::kF32});
  Tensor act = engine::testing::RandomTensor({2, 3, 5}, 1);
  // In-process sends are buffered, so one thread can play both ranks.
  ASSERT_TRUE(SendActivation(*sender, backend, act, 1, 3).ok());
  absl::StatusOr<Tensor> got = RecvActivation(*receiver, backend, 0, 3);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shape(), act.shape());
  EXPECT_TRUE(engine::testing::BitwiseEqual(*got, act));
  // A header claiming rank 9.
  ASSERT_TRUE(sender->Send(Tensor::FromInts({8}, {0, 9, 1, 1, 1, 1, 1, 1}), 1, ActivationHeaderTag(0)).ok());
  EXPECT_EQ(RecvActivation(*receiver, backend, 0, 0).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(SendActivation(*sender, backend, Tensor(), 1, 0).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::engine::parallel
