// Issue #25's design in the plan: GPT-2 124M (bench/gpt2_124m.yaml) on an
// H100 in bf16 under the old design, the fused classifier alone, and the
// classifier with 16-bit storage; the attention path per head size and
// precision; the CPU's fp32 storage.
#include <cmath>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec.h"
#include "engine/core/classifier_geometry.h"
#include "engine/plan/plan.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::plan {
namespace {

constexpr double kGiB = 1 << 30;
constexpr int64_t kGpt2Parameters = 124439808;

TrainerConfig Gpt2(int64_t batch, const std::vector<std::string>& more = {}) {
  std::vector<std::string> overrides = {absl::StrCat("data.batch_size=", batch)};
  overrides.insert(overrides.end(), more.begin(), more.end());
  auto spec = LoadJobSpecFile("bench/gpt2_124m.yaml", overrides);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto config = TrainerConfigFromSpec(*spec);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

DeviceProfile Device(const std::string& name) {
  auto device = FindDevice(name);
  EXPECT_TRUE(device.ok()) << device.status();
  return *device;
}

PlanOptions Design(bool sixteen_bit_storage, bool fused_classifier) {
  PlanOptions o;
  o.sixteen_bit_storage = sixteen_bit_storage;
  o.fused_classifier = fused_classifier;
  return o;
}

Plan MustPlan(const TrainerConfig& config, const std::string& device, const PlanOptions& options) {
  auto plan = MakePlan(config, 1, 1, Device(device), options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(PlanDesignTest, Gpt2PeakAtMicroBatch16OldClassifierAloneAndBoth) {
  const TrainerConfig config = Gpt2(16);
  const Plan old = MustPlan(config, "h100", Design(false, false));
  const Plan classifier = MustPlan(config, "h100", Design(false, true));
  const Plan both = MustPlan(config, "h100", {});
  const MemoryBreakdown &mo = old.stages[0].memory, &mc = classifier.stages[0].memory, &mb = both.stages[0].memory;
  std::cout << "GPT-2 124M, micro-batch 16, h100 bf16: peak " << old.peak_bytes / kGiB << " GiB (old), "
            << classifier.peak_bytes / kGiB << " GiB (classifier alone), " << both.peak_bytes / kGiB
            << " GiB (classifier + 16-bit storage)\n";
  // The old model: fp32 logits and their gradient, 6.1 GiB of 17.4.
  EXPECT_EQ(mo.logits, int64_t{2} * 4 * 16 * 1024 * 50257);
  EXPECT_NEAR(old.peak_bytes / kGiB, 17.42, 0.005);
  // The classifier alone: one 4-byte chunk of 640 x 50,304 logits and dh [16 x 1024, 768]
  // in fp32, the padding rows in the model states: at least 5 GiB less.
  EXPECT_EQ(classifier.padded_vocab, 50304);
  EXPECT_EQ(classifier.classifier_chunk_rows, ClassifierChunkRows(16 * 1024, 50304, 4));
  EXPECT_EQ(classifier.classifier_chunk_rows, 640);
  EXPECT_EQ(mc.logits, int64_t{4} * 640 * 50304 + int64_t{4} * 16 * 1024 * 768);
  EXPECT_EQ(mc.weights - mo.weights, int64_t{4} * (50304 - 50257) * 768);
  EXPECT_EQ(mc.activations, mo.activations);
  // The chunk buffer and dh are freed before the layers' backward, whose
  // transients need only what exceeds them.
  EXPECT_EQ(mc.transients, mo.transients - mc.logits);
  EXPECT_GE(old.peak_bytes - classifier.peak_bytes, int64_t{5} << 30);
  EXPECT_NEAR(classifier.peak_bytes / kGiB, 11.29, 0.005);
  // 16-bit storage: activations in 2 bytes (statistics and the saved
  // logsumexp in fp32), a 2-byte copy of every GEMM operand, a 2-byte chunk.
  EXPECT_EQ(both.activation_bytes, 2);
  EXPECT_EQ(both.classifier_chunk_rows, 1280);
  EXPECT_EQ(mb.logits, int64_t{2} * 1280 * 50304 + int64_t{2} * 16 * 1024 * 768);
  EXPECT_EQ(mb.weight_copies, int64_t{2} * (12 * (12 * 768 * 768 + 9 * 768) + int64_t{50304} * 768));
  // Per token and layer: 16 C activations of 2 bytes, 4 statistics and 12 logsumexps of 4.
  const int64_t layer_bytes = (16 * 768 * 2 + 4 * 4 + 12 * 4) * int64_t{1024} * 16;
  const int64_t ends = (768 * 2 + (768 * 2 + 8)) * int64_t{1024} * 16;  // embedding output; ln_f output + stats
  EXPECT_EQ(mb.activations, 12 * layer_bytes + ends);
  EXPECT_LT(mb.activations, mc.activations / 2 + mc.activations / 50);
  EXPECT_LT(both.peak_bytes, classifier.peak_bytes - (int64_t{4} << 30));
  EXPECT_NEAR(both.peak_bytes / kGiB, 7.18, 0.005);
  // The parameter count stays PyTorch's.
  for (const Plan* p : {&old, &classifier, &both}) EXPECT_EQ(p->parameters, kGpt2Parameters);
  // `ringmaster plan` says what each part of the design saves on this peak.
  const Plan whole_logits = MustPlan(config, "h100", Design(true, false));
  auto has_note = [&](const std::string& note) {
    for (const std::string& n : both.notes)
      if (n == note) return true;
    return false;
  };
  EXPECT_TRUE(has_note(absl::StrFormat("16-bit activation storage lowers the peak by %.2f GiB (%.2f GiB without it)",
                                       (classifier.peak_bytes - both.peak_bytes) / kGiB, classifier.peak_bytes / kGiB)));
  EXPECT_TRUE(has_note(absl::StrFormat("the fused, chunked classifier lowers the peak by %.2f GiB (%.2f GiB without it)",
                                       (whole_logits.peak_bytes - both.peak_bytes) / kGiB,
                                       whole_logits.peak_bytes / kGiB)));
  for (const std::string& n : old.notes) EXPECT_EQ(n.find("lowers the peak"), std::string::npos) << n;
}

TEST(PlanDesignTest, TheCpuKeepsFp32ActivationsAndTheSameClassifier) {
  const TrainerConfig config = Gpt2(16);
  const Plan cpu = MustPlan(config, "cpu", {});
  const Plan gpu_classifier_alone = MustPlan(config, "h100", Design(false, true));
  EXPECT_EQ(cpu.activation_bytes, 4);
  EXPECT_FALSE(cpu.weight_copies);
  EXPECT_EQ(cpu.stages[0].memory.weight_copies, 0);
  EXPECT_TRUE(cpu.fused_classifier);
  EXPECT_EQ(cpu.stages[0].memory.logits, gpu_classifier_alone.stages[0].memory.logits);
  EXPECT_EQ(cpu.attention, "unfused");  // the CPU saves the probabilities [B, H, T, T]
  EXPECT_EQ(cpu.time_model, "mfu");
  EXPECT_TRUE(cpu.stages[0].ops.empty());
  // The design switches change nothing on the CPU but the classifier.
  EXPECT_EQ(MustPlan(config, "cpu", Design(false, true)).peak_bytes, cpu.peak_bytes);
}

TEST(PlanDesignTest, AttentionPathFollowsPrecisionAndHeadSize) {
  struct Case {
    std::string device;
    int64_t heads;
    std::string precision;
    std::string attention;
    bool saves_scores;  // [B, H, T, T] rather than [B, H, T]
  };
  const Case cases[] = {
      {"h100", 12, "bf16", "cudnn flash", false},          // head size 64
      {"h100", 4, "bf16", "cudnn flash", false},           // 192: Hopper takes up to 256
      {"h100", 2, "bf16", "unfused", true},                // 384
      {"a100", 6, "bf16", "cudnn flash", false},           // 128: Ampere's backward limit
      {"a100", 4, "bf16", "unfused", true},
      {"h100", 12, "fp32", "flash (fp32 kernels)", false}, // our kernels take up to 64
      {"h100", 6, "fp32", "unfused", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.device, ", ", c.heads, " heads, ", c.precision));
    const TrainerConfig config = Gpt2(4, {absl::StrCat("model.gpt.heads=", c.heads),
                                          absl::StrCat("precision.compute=", c.precision)});
    const Plan p = MustPlan(config, c.device, {});
    EXPECT_EQ(p.attention, c.attention);
    const int64_t a = c.precision == "bf16" ? 2 : 4;
    const int64_t saved = 4 * c.heads * (c.saves_scores ? 1024 : 1);
    const int64_t layer = (16 * 768 * a + 16 + saved) * int64_t{1024} * 4;
    const int64_t ends = (768 * a + (768 * a + 8)) * int64_t{1024} * 4;
    EXPECT_EQ(p.stages[0].memory.activations, 12 * layer + ends);
  }
  // The old design runs bf16 attention in our fp32 kernels.
  EXPECT_EQ(MustPlan(Gpt2(4), "h100", Design(false, true)).attention, "flash (fp32 kernels)");
}

TEST(PlanDesignTest, PaddingRowsAreStoredButNotCounted) {
  TrainerConfig config = Gpt2(16);
  config.parallel.data = 8;
  auto dp = MakePlan(config, 1, 8, Device("h100"), {});
  ASSERT_TRUE(dp.ok()) << dp.status();
  const int64_t stored = kGpt2Parameters + (50304 - 50257) * 768;
  EXPECT_EQ(dp->parameters, kGpt2Parameters);
  EXPECT_EQ(dp->stages[0].memory.gradient_buffers, 4 * stored);  // fp32 buckets, as before
  EXPECT_EQ(dp->stages[0].memory.gradients, 4 * stored);
  EXPECT_EQ(dp->stages[0].memory.optimizer_state, 8 * stored);
  EXPECT_NEAR(dp->allreduce_seconds, 2.0 * 7 / 8 * 4.0 * stored / 450e9, 1e-12);
  config.parallel.zero1 = true;
  auto zero = MakePlan(config, 1, 8, Device("h100"), {});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->stages[0].memory.optimizer_state, 8 * ((stored + 7) / 8));
  // Untied, the head has its own padded table (and copy) beside the embedding's.
  config = Gpt2(16);
  config.model.tie_embeddings = false;
  auto untied = MakePlan(config, 1, 1, Device("h100"), {});
  ASSERT_TRUE(untied.ok());
  EXPECT_EQ(untied->parameters, kGpt2Parameters + 50257 * 768);
  EXPECT_EQ(untied->stages[0].memory.gradients, 4 * (stored + int64_t{50304} * 768));
  EXPECT_EQ(untied->stages[0].memory.weight_copies,
            2 * (12 * (12 * 768 * 768 + 9 * 768) + 2 * int64_t{50304} * 768));
}

}  // namespace
}  // namespace ringmaster::engine::plan
