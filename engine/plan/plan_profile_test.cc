// The GPU step-time profile by op class: totals are the sums of their ops,
// the GEMM FLOPs are the model's matmul FLOPs, the old design is slower than
// the new one, each rate moves only the classes that depend on it, and --mfu
// overrides the profile.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/spec.h"
#include "engine/plan/plan.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::plan {
namespace {

constexpr double kL = 12, kC = 768, kT = 1024, kH = 12, kV = 50257, kPaddedV = 50304;

TrainerConfig ConfigOf(const std::string& path, const std::vector<std::string>& overrides) {
  auto spec = LoadJobSpecFile(path, overrides);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto config = TrainerConfigFromSpec(*spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

TrainerConfig Gpt2(int64_t batch) {
  return ConfigOf("bench/gpt2_124m.yaml", {absl::StrCat("data.batch_size=", batch)});
}

DeviceProfile H100() {
  auto device = FindDevice("h100");
  EXPECT_TRUE(device.ok()) << device.status();
  return *device;
}

PlanOptions OldDesign() {
  PlanOptions o;
  o.sixteen_bit_storage = false;
  o.fused_classifier = false;
  return o;
}

Plan MustPlan(const TrainerConfig& config, const DeviceProfile& device, const PlanOptions& options, int ranks = 1) {
  auto plan = MakePlan(config, 1, ranks, device, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

const OpClassTotal& Class(const Plan& p, OpClass c) { return p.stages[0].by_class[static_cast<int>(c)]; }

constexpr OpClass kMemoryBound[] = {OpClass::kNormalization, OpClass::kElementwise,  OpClass::kLoss,
                                    OpClass::kEmbedding,     OpClass::kOptimizer,    OpClass::kWeightCopies,
                                    OpClass::kConversions};

void ExpectTotalsAreSums(const Plan& p) {
  ASSERT_FALSE(p.stages.empty());
  double slowest = 0, optimizer = 0;
  for (const StagePlan& s : p.stages) {
    ASSERT_FALSE(s.ops.empty());
    double step = 0;
    for (int c = 0; c < kNumOpClasses; ++c) {
      OpClassTotal sum;
      for (const OpCost& op : s.ops) {
        if (static_cast<int>(op.op_class) != c) continue;
        sum.flops += op.flops;
        sum.bytes += op.bytes;
        sum.seconds += op.seconds;
        // A memory-bound op is its bytes at the bandwidth.
        if (std::find(std::begin(kMemoryBound), std::end(kMemoryBound), op.op_class) != std::end(kMemoryBound)) {
          EXPECT_EQ(op.flops, 0) << op.name;
          EXPECT_NEAR(op.seconds, op.bytes / p.memory_bandwidth, 1e-12 * op.seconds) << op.name;
        }
      }
      EXPECT_NEAR(s.by_class[c].seconds, sum.seconds, 1e-12 * sum.seconds) << c;
      EXPECT_NEAR(s.by_class[c].flops, sum.flops, 1e-12 * sum.flops) << c;
      EXPECT_NEAR(s.by_class[c].bytes, sum.bytes, 1e-12 * sum.bytes) << c;
      step += s.by_class[c].seconds;
    }
    EXPECT_NEAR(step, s.micro_batch_seconds * p.micro_batches + s.optimizer_seconds, 1e-12 * step);
    slowest = std::max(slowest, s.micro_batch_seconds);
    optimizer = std::max(optimizer, s.optimizer_seconds);
  }
  // The step's compute: every micro-batch (with the pipeline's bubble) and the optimizer.
  const double micro_batches = p.pipeline > 1 ? p.micro_batches + p.pipeline - 1 : p.micro_batches;
  const double micro = p.pipeline > 1 ? slowest : p.stages[0].micro_batch_seconds;
  EXPECT_NEAR(p.compute_seconds, micro * micro_batches + optimizer, 1e-12 * p.compute_seconds);
  EXPECT_EQ(p.time_model, "op classes");
  EXPECT_NEAR(p.mfu, p.flops_per_step / p.ranks / p.compute_seconds / p.peak_flops, 1e-12);
}

TEST(PlanProfileTest, ClassTotalsAreTheSumsOfTheirOps) {
  ExpectTotalsAreSums(MustPlan(Gpt2(16), H100(), {}));
  ExpectTotalsAreSums(MustPlan(Gpt2(16), H100(), OldDesign()));
  const std::vector<std::string> gpu = {"resources.device=cuda", "precision.compute=bf16"};
  TrainerConfig cnn = ConfigOf("examples/fashion_mnist_cnn.yaml", gpu);
  ExpectTotalsAreSums(MustPlan(cnn, H100(), {}, 2));
  ExpectTotalsAreSums(MustPlan(cnn, H100(), OldDesign(), 2));
  TrainerConfig pipeline = ConfigOf("examples/gpt_text.yaml", {"resources.device=cuda", "precision.compute=fp16",
                                                               "parallelism.data=1", "parallelism.pipeline=2",
                                                               "parallelism.micro_batches=4"});
  ExpectTotalsAreSums(MustPlan(pipeline, H100(), {}, 2));
  TrainerConfig mlp = ConfigOf("examples/fashion_mnist_mlp.yaml", {"resources.device=cuda"});
  ExpectTotalsAreSums(MustPlan(mlp, *FindDevice("a100"), {}, 2));
}

TEST(PlanProfileTest, GemmFlopsAreTheModelsMatmulFlops) {
  const double tokens = 16 * kT;
  const Plan p = MustPlan(Gpt2(16), H100(), {});
  // Linear layers (12 C^2 per layer) and the classifier's padded columns, 3x the forward.
  const double gemm = 6.0 * (12.0 * kL * kC * kC + kPaddedV * kC) * tokens;
  EXPECT_NEAR(Class(p, OpClass::kGemm).flops, gemm, 1e-12 * gemm);
  // What the plan reports: 6N + 12 L C T per token with N the matmul weights
  // (real vocabulary), plus the elementwise terms the partitioner counts.
  const double elementwise = 3.0 * (kC + kL * (25.0 * kC + 5.0 * kH * kT) + 5.0 * kC) + 5.0 * kV;
  const double attention_model = 12.0 * kL * kC * kT;
  EXPECT_NEAR(p.flops_per_step,
              gemm - 6.0 * (kPaddedV - kV) * kC * tokens + (attention_model + elementwise) * tokens,
              1e-12 * p.flops_per_step);
  // Attention as executed: causal halves every product; cuDNN's backward
  // recomputes the scores (2 + 5 products), our fp32 kernels' backward both
  // the scores and dP in its two passes (2 + 7).
  EXPECT_NEAR(Class(p, OpClass::kAttention).flops, 7.0 * kL * kC * kT * tokens, 1e-9 * p.flops_per_step);
  const Plan old = MustPlan(Gpt2(16), H100(), OldDesign());
  EXPECT_NEAR(Class(old, OpClass::kAttention).flops, 9.0 * kL * kC * kT * tokens, 1e-9 * p.flops_per_step);
  EXPECT_NEAR(Class(old, OpClass::kGemm).flops, 6.0 * (12.0 * kL * kC * kC + kV * kC) * tokens, 1e-12 * gemm);
  EXPECT_EQ(old.flops_per_step, p.flops_per_step);
}

TEST(PlanProfileTest, TheOldDesignIsSlower) {
  for (int64_t batch : {16, 64}) {
    SCOPED_TRACE(batch);
    const Plan after = MustPlan(Gpt2(batch), H100(), {});
    const Plan before = MustPlan(Gpt2(batch), H100(), OldDesign());
    EXPECT_GT(before.step_seconds, after.step_seconds);
    EXPECT_GT(after.tokens_per_second, before.tokens_per_second);
    EXPECT_GT(Class(before, OpClass::kConversions).seconds, 0);
    EXPECT_EQ(Class(after, OpClass::kConversions).seconds, 0);
    EXPECT_EQ(Class(before, OpClass::kWeightCopies).seconds, 0);
    EXPECT_GT(Class(after, OpClass::kWeightCopies).seconds, 0);
    for (OpClass c : {OpClass::kAttention, OpClass::kNormalization, OpClass::kElementwise, OpClass::kLoss})
      EXPECT_GT(Class(before, c).seconds, Class(after, c).seconds) << OpClassName(c);
  }
}

TEST(PlanProfileTest, RatesMoveOnlyTheClassesThatDependOnThem) {
  const TrainerConfig config = Gpt2(16);
  const Plan base = MustPlan(config, H100(), {});
  DeviceProfile fast_math = H100();
  fast_math.large_gemm_bf16 *= 2;
  const Plan math = MustPlan(config, fast_math, {});
  EXPECT_LT(Class(math, OpClass::kGemm).seconds, Class(base, OpClass::kGemm).seconds);
  EXPECT_DOUBLE_EQ(2 * Class(math, OpClass::kAttention).seconds, Class(base, OpClass::kAttention).seconds);
  for (OpClass c : kMemoryBound) EXPECT_EQ(Class(math, c).seconds, Class(base, c).seconds) << OpClassName(c);

  DeviceProfile fast_memory = H100();
  fast_memory.memory_bytes_per_second *= 2;
  const Plan memory = MustPlan(config, fast_memory, {});
  for (OpClass c : kMemoryBound)
    EXPECT_DOUBLE_EQ(2 * Class(memory, c).seconds, Class(base, c).seconds) << OpClassName(c);
  EXPECT_EQ(Class(memory, OpClass::kAttention).seconds, Class(base, OpClass::kAttention).seconds);
  // A GEMM's own operand traffic runs at the bandwidth too.
  EXPECT_LT(Class(memory, OpClass::kGemm).seconds, Class(base, OpClass::kGemm).seconds);
  EXPECT_EQ(Class(memory, OpClass::kGemm).flops, Class(base, OpClass::kGemm).flops);

  // The old design's attention runs on CUDA cores: the fp32 peak moves it
  // and nothing else; the tensor-core rate does not move it.
  const Plan old = MustPlan(config, H100(), OldDesign());
  DeviceProfile fast_fp32 = H100();
  fast_fp32.peak_fp32 *= 2;
  const Plan fp32 = MustPlan(config, fast_fp32, OldDesign());
  EXPECT_DOUBLE_EQ(2 * Class(fp32, OpClass::kAttention).seconds, Class(old, OpClass::kAttention).seconds);
  for (OpClass c : kMemoryBound) EXPECT_EQ(Class(fp32, c).seconds, Class(old, c).seconds) << OpClassName(c);
  EXPECT_EQ(Class(fp32, OpClass::kGemm).seconds, Class(old, OpClass::kGemm).seconds);
  EXPECT_EQ(Class(MustPlan(config, fast_math, OldDesign()), OpClass::kAttention).seconds,
            Class(old, OpClass::kAttention).seconds);
}

TEST(PlanProfileTest, MfuOverridesTheProfile) {
  const TrainerConfig config = Gpt2(16);
  PlanOptions options;
  options.mfu = 0.5;
  const Plan p = MustPlan(config, H100(), options);
  EXPECT_EQ(p.time_model, "mfu");
  EXPECT_EQ(p.mfu, 0.5);
  // The blocks' training FLOPs at that fraction of the peak (the loss's are not timed).
  const double flops = 3.0 * p.stages[0].forward_flops_per_sample * p.micro_batch;
  EXPECT_NEAR(p.compute_seconds, flops / (0.5 * p.peak_flops), 1e-12);
  EXPECT_GT(Class(p, OpClass::kGemm).seconds, 0);  // still reported
  options.mfu = -0.1;
  EXPECT_NE(MakePlan(config, 1, 1, H100(), options).status().message().find("--mfu"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster::engine::plan
