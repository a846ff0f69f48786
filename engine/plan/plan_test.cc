// The plan's formulas: parameter counts and forward FLOPs against the models
// the engine builds and the partitioner's FLOP counter, GPT-2 124M's model
// states at 16 B/param (+2 per GEMM operand in 16 bits), ZeRO-1, the pipeline's bubble and in-flight
// micro-batches, the ring all-reduce, and the verdict.
#include "engine/plan/plan.h"

#include <cmath>

#include "common/spec.h"
#include "engine/core/cpu_backend.h"
#include "engine/nn/model.h"
#include "engine/parallel/stage_partition_cost.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::plan {
namespace {

constexpr const char* kExamples[] = {"examples/fashion_mnist_mlp.yaml", "examples/fashion_mnist_cnn.yaml",
                                     "examples/gpt_text.yaml"};

TrainerConfig ConfigOf(const std::string& path, const std::vector<std::string>& overrides = {}) {
  auto spec = LoadJobSpecFile(path, overrides);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto config = TrainerConfigFromSpec(*spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// GPT-2 small: 12 layers, 12 heads, 768 wide, 1024 tokens, 50257 tokens, tied.
TrainerConfig Gpt2Small() {
  return ConfigOf("examples/gpt_text.yaml",
                  {"model.gpt.layers=12", "model.gpt.heads=12", "model.gpt.width=768", "model.gpt.context=1024",
                   "model.gpt.vocab_size=50257", "data.dataset=synthetic", "data.path=", "data.batch_size=16",
                   "parallelism.data=1", "resources.ranks_per_node=1", "precision.compute=bf16",
                   "resources.device=cuda", "optimizer.type=adamw"});
}

DeviceProfile Device(const std::string& name) {
  auto device = FindDevice(name);
  EXPECT_TRUE(device.ok()) << device.status();
  return *device;
}

TEST(PlanTest, ParameterCountsAndForwardFlopsMatchTheBuiltModels) {
  for (const char* path : kExamples) {
    SCOPED_TRACE(path);
    TrainerConfig config = ConfigOf(path);
    CpuBackend cpu;
    auto model = nn::BuildModel(config.model, cpu);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(ModelParameters(config.model), (*model)->NumParameters());
    // The partitioner's counter runs an eval forward of one sample.
    auto counted = parallel::EstimateBlockFlops(config.model, parallel::SampleInput(config.model, 1));
    ASSERT_TRUE(counted.ok()) << counted.status();
    std::vector<double> planned = BlockForwardFlopsPerSample(config.model);
    ASSERT_EQ(planned.size(), counted->size());
    for (size_t i = 0; i < planned.size(); ++i) EXPECT_NEAR(planned[i], (*counted)[i], 1e-9 * (*counted)[i]) << i;
  }
}

// GPT-2 small's stored parameters: the count plus the padding rows of its
// vocabulary table (50,257 -> 50,304); its GEMM operands: the four Linears of
// each layer and the (tied) table.
constexpr int64_t kGpt2Parameters = 124439808;
constexpr int64_t kGpt2Stored = kGpt2Parameters + (50304 - 50257) * 768;
constexpr int64_t kGpt2Operands = 12 * (12 * 768 * 768 + 9 * 768) + int64_t{50304} * 768;

TEST(PlanTest, Gpt2SmallModelStatesAreSixteenBytesPerParameterAndTwoPerOperand) {
  TrainerConfig config = Gpt2Small();
  EXPECT_EQ(ModelParameters(config.model), kGpt2Parameters);  // GPT-2 124M with tied embeddings
  auto plan = MakePlan(config, 1, 1, Device("h100"), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->stages.size(), 1u);
  const MemoryBreakdown& m = plan->stages[0].memory;
  EXPECT_EQ(plan->parameters, kGpt2Parameters);
  EXPECT_EQ(m.weights, 4 * kGpt2Stored);
  EXPECT_EQ(m.gradients, 4 * kGpt2Stored);
  EXPECT_EQ(m.optimizer_state, 8 * kGpt2Stored);
  EXPECT_EQ(m.weight_copies, 2 * kGpt2Operands);  // bf16 on a GPU: a 16-bit copy of each GEMM operand
  EXPECT_EQ(m.model_states(), 16 * kGpt2Stored + 2 * kGpt2Operands);
  EXPECT_EQ(m.gradient_buffers, 0);  // one rank: no buckets
  EXPECT_EQ(plan->precision, "bf16");
  // 6N + 12 L C T FLOPs per token, N without the position embedding, plus
  // the elementwise terms the counter adds (under 1% here).
  const double n = 124439808.0 - 1024 * 768;
  const double expected = 6 * n + 12.0 * 12 * 768 * 1024;
  EXPECT_NEAR(plan->flops_per_token, expected, 0.01 * expected);
  EXPECT_TRUE(plan->fits);
  // SGD with momentum: 4 + 4 + 4.
  config.optimizer.kind = optim::OptimizerKind::kSgd;
  config.optimizer.momentum = 0.9f;
  plan = MakePlan(config, 1, 1, Device("h100"), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->stages[0].memory.model_states(), 12 * kGpt2Stored + 2 * kGpt2Operands);
}

TEST(PlanTest, DataParallelAddsBucketsAndZeroOneShardsTheOptimizerState) {
  TrainerConfig config = Gpt2Small();
  config.parallel.data = 8;
  auto dp = MakePlan(config, 1, 8, Device("h100"), {});
  ASSERT_TRUE(dp.ok()) << dp.status();
  const int64_t n = kGpt2Stored;
  EXPECT_EQ(dp->stages[0].memory.gradient_buffers, 4 * n);
  EXPECT_EQ(dp->stages[0].memory.optimizer_state, 8 * n);
  // Ring all-reduce of the fp32 gradients over NVLink: 2 (n-1)/n x bytes / bandwidth.
  EXPECT_NEAR(dp->allreduce_seconds, 2.0 * 7 / 8 * 4.0 * n / 450e9, 1e-12);
  EXPECT_GE(dp->allreduce_exposed_seconds, dp->allreduce_seconds / std::ceil(4.0 * n / (25 << 20)) - 1e-12);
  config.parallel.zero1 = true;
  auto zero = MakePlan(config, 1, 8, Device("h100"), {});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->stages[0].memory.optimizer_state, 8 * ((n + 7) / 8));
  EXPECT_EQ(zero->stages[0].memory.gradient_buffers, 4 * ((n + 7) / 8) * 9);  // flat gradients and the shard
  EXPECT_EQ(zero->allreduce_exposed_seconds, zero->allreduce_seconds);
  // Across nodes the ring runs at the network's bandwidth.
  auto two_nodes = MakePlan(config, 2, 4, Device("h100"), {});
  ASSERT_TRUE(two_nodes.ok());
  EXPECT_NEAR(two_nodes->allreduce_seconds, dp->allreduce_seconds * 450.0 / 50.0, 1e-9);
}

TEST(PlanTest, PipelineStagesHoldTheirInFlightMicroBatches) {
  TrainerConfig config = ConfigOf("examples/gpt_text.yaml", {"parallelism.data=1", "parallelism.pipeline=2",
                                                             "parallelism.micro_batches=4"});
  auto plan = MakePlan(config, 1, 2, Device("cpu"), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->stages.size(), 2u);
  EXPECT_EQ(plan->stages[0].in_flight, 2);  // 1F1B: min(P - stage, m)
  EXPECT_EQ(plan->stages[1].in_flight, 1);
  EXPECT_DOUBLE_EQ(plan->bubble_fraction, 1.0 / 5.0);  // (p - 1) / (m + p - 1)
  EXPECT_EQ(plan->stages[0].memory.logits, 0);
  EXPECT_GT(plan->stages[1].memory.logits, 0);
  // The stages split the optimizer state; the last also trains the tied embedding.
  EXPECT_EQ(plan->stages[0].parameters + plan->stages[1].parameters,
            plan->parameters + config.model.vocab_size * config.model.n_embd);
  config.parallel.schedule = parallel::ScheduleKind::kGpipe;
  plan = MakePlan(config, 1, 2, Device("cpu"), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->stages[0].in_flight, 4);
  EXPECT_EQ(plan->stages[1].in_flight, 4);
}

TEST(PlanTest, TheVerdictSaysWhenItDoesNotFit) {
  // GPT-2 XL-sized (1.5B) with AdamW at a large micro-batch on an 80 GB A100.
  TrainerConfig config = Gpt2Small();
  config.model.n_layer = 48;
  config.model.n_head = 25;
  config.model.n_embd = 1600;
  config.data.global_batch = 32;
  auto plan = MakePlan(config, 1, 1, Device("a100"), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->fits);
  EXPECT_LT(plan->headroom_bytes, 0);
  EXPECT_NE(PlanTable(*plan).find("does not fit"), std::string::npos);
  EXPECT_NE(PlanJson(*plan).find("\"fits\":false"), std::string::npos);
  // At one sequence per step it fits: 18 B/param is 28 GB, the activations 2.5 GB.
  config.data.global_batch = 1;
  plan = MakePlan(config, 1, 1, Device("h200"), {});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->fits) << PlanTable(*plan);
}

TEST(PlanTest, BadInputsNameTheirFlag) {
  EXPECT_NE(FindDevice("v100").status().message().find("--gpu"), std::string::npos);
  EXPECT_TRUE(FindDevice("H100").ok());
  PlanOptions too_high;
  too_high.mfu = 1.5;
  auto plan = MakePlan(Gpt2Small(), 1, 1, Device("h100"), too_high);
  EXPECT_NE(plan.status().message().find("--mfu"), std::string::npos);
  plan = MakePlan(Gpt2Small(), 1, 2, Device("h100"), {});
  EXPECT_NE(plan.status().message().find("resources"), std::string::npos);
}

TEST(PlanTest, EpochLengthComesFromTheDataset) {
  auto spec = LoadJobSpecFile("examples/fashion_mnist_cnn.yaml");
  ASSERT_TRUE(spec.ok());
  auto plan = PlanJobSpec(*spec, Device("cpu"), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->total_steps, 3 * (60000 / 64));  // 3 epochs of 937 steps
  EXPECT_GT(plan->total_seconds, 0);
}

}  // namespace
}  // namespace ringmaster::engine::plan
