#include "engine/plan/plan_notes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "engine/plan/plan.h"

namespace ringmaster::engine::plan {
namespace {

constexpr double kGiB = double{1 << 30};
constexpr OpClass kClasses[kNumOpClasses] = {OpClass::kGemm,       OpClass::kAttention,    OpClass::kNormalization,
                                             OpClass::kElementwise, OpClass::kLoss,        OpClass::kEmbedding,
                                             OpClass::kOptimizer,  OpClass::kWeightCopies, OpClass::kConversions};

// The three designs, in the order of the tables.
struct Design {
  const char* name;
  PlanOptions options;
};
std::vector<Design> Designs() {
  PlanOptions before, classifier, after;
  before.sixteen_bit_storage = classifier.sixteen_bit_storage = false;
  before.fused_classifier = false;
  return {{"before", before}, {"classifier alone", classifier}, {"after", after}};
}

std::string Ms(double seconds) { return absl::StrFormat("%.2f", seconds * 1e3); }
std::string GiB(int64_t bytes) { return absl::StrFormat("%.2f", bytes / kGiB); }

std::string Row(const std::string& name, const std::vector<std::string>& cells) {
  return absl::StrCat("| ", name, " | ", absl::StrJoin(cells, " | "), " |\n");
}

template <typename F>
std::string PlanRow(const std::string& name, const std::vector<Plan>& plans, F cell) {
  std::vector<std::string> cells;
  for (const Plan& p : plans) cells.push_back(cell(p));
  return Row(name, cells);
}

std::string MemoryTable(const std::vector<int64_t>& batches, const std::vector<std::vector<Plan>>& plans) {
  std::string out = "| GiB per GPU | before | classifier alone | after | after - before |\n|---|--:|--:|--:|--:|\n";
  for (size_t i = 0; i < batches.size(); ++i) {
    const std::vector<Plan>& p = plans[i];
    auto memory = [](const Plan& plan) { return plan.stages[0].memory; };
    absl::StrAppend(&out, Row(absl::StrCat("**peak, micro-batch ", batches[i], "**"),
                              {GiB(p[0].peak_bytes), GiB(p[1].peak_bytes), GiB(p[2].peak_bytes),
                               GiB(p[2].peak_bytes - p[0].peak_bytes)}));
    auto part = [&](const std::string& name, int64_t (*field)(const MemoryBreakdown&)) {
      absl::StrAppend(&out, Row(name, {GiB(field(memory(p[0]))), GiB(field(memory(p[1]))), GiB(field(memory(p[2]))),
                                       GiB(field(memory(p[2])) - field(memory(p[0])))}));
    };
    part("  model states (weights, 16-bit copies, gradients, AdamW)",
         [](const MemoryBreakdown& m) { return m.model_states(); });
    part("  activations", [](const MemoryBreakdown& m) { return m.activations; });
    part("  logits and their gradient / classifier chunk and dh", [](const MemoryBreakdown& m) { return m.logits; });
    part("  backward transients", [](const MemoryBreakdown& m) { return m.transients; });
  }
  return out;
}

std::string TimeTable(int64_t batch, const std::vector<Plan>& plans) {
  std::string out = absl::StrFormat(
      "Micro-batch %d (%d tokens per step):\n\n| ms per step | before | classifier alone | after | after - before |\n"
      "|---|--:|--:|--:|--:|\n",
      batch, batch * plans[0].tokens_per_sample);
  for (OpClass c : kClasses) {
    const int i = static_cast<int>(c);
    if (std::all_of(plans.begin(), plans.end(), [&](const Plan& p) { return p.stages[0].by_class[i].seconds == 0; }))
      continue;
    std::vector<std::string> cells;
    for (const Plan& p : plans) cells.push_back(Ms(p.stages[0].by_class[i].seconds));
    cells.push_back(Ms(plans[2].stages[0].by_class[i].seconds - plans[0].stages[0].by_class[i].seconds));
    absl::StrAppend(&out, Row(std::string(OpClassName(c)), cells));
  }
  absl::StrAppend(&out, Row("**step**", {Ms(plans[0].step_seconds), Ms(plans[1].step_seconds),
                                         Ms(plans[2].step_seconds),
                                         Ms(plans[2].step_seconds - plans[0].step_seconds)}));
  auto tokens = [](const Plan& p) { return absl::StrFormat("%.0f", p.tokens_per_second / 1e3); };
  absl::StrAppend(&out, Row("**tokens/s (thousands)**",
                            {tokens(plans[0]), tokens(plans[1]), tokens(plans[2]),
                             absl::StrFormat("x%.2f", plans[2].tokens_per_second / plans[0].tokens_per_second)}));
  auto mfu = [](const Plan& p) { return absl::StrFormat("%.1f%%", 100.0 * p.mfu); };
  absl::StrAppend(&out, Row("MFU (model FLOPs / bf16 peak)", {mfu(plans[0]), mfu(plans[1]), mfu(plans[2]), ""}));
  return out;
}

// Each GEMM of the after design at `plan`'s micro-batch: its predicted rate.
std::string GemmTable(const Plan& plan) {
  std::string out =
      "| GEMM (after, whole step) | GFLOP | ms | TFLOP/s | of the large-GEMM rate |\n|---|--:|--:|--:|--:|\n";
  for (const OpCost& op : plan.stages[0].ops) {
    if (op.op_class != OpClass::kGemm) continue;
    const double rate = op.flops / op.seconds;
    absl::StrAppend(&out, Row(op.name, {absl::StrFormat("%.1f", op.flops / 1e9), Ms(op.seconds),
                                        absl::StrFormat("%.0f", rate / 1e12),
                                        absl::StrFormat("%.0f%%", 100.0 * rate / plan.matmul_rate)}));
  }
  return out;
}

std::string MemoryAssumptions(const nn::ModelConfig& m, const Plan& classifier, const Plan& after) {
  return absl::StrFormat(
      "- **Memory** is what engine/plan/plan.h documents, tensor by tensor: AdamW's fp32 weights, gradients and "
      "two moments of the %d parameters and of the vocabulary table's %d padding rows (classifier alone and "
      "after), and after a bf16 copy of every GEMM operand; per token and layer 16 C activations of a bytes "
      "(before 4, after 2), 4 LayerNorm statistics and %d saved logsumexps of 4 bytes; the classifier's one "
      "chunk of logits (%d rows of %d in fp32, %d in bf16: engine/core/classifier_geometry.h's 128 MiB) and the "
      "head's input gradient [B T, C], where before held the whole logits and their gradient in fp32; the "
      "backward's transients: twice a layer's largest activation and, after, cuDNN's backward workspace "
      "(engine/cuda/cudnn_sdpa.h: the deterministic graph's dP [B, H, T, T] in bf16 while it fits in 2 GiB), less "
      "the caches already freed and the fused classifier's buffers (freed before the layers' backward: the peak "
      "is the larger of the classifier's forward and the backward). Not counted: the caching allocator's free blocks and fragmentation, and cuBLAS "
      "workspaces (the 1 GiB reserve is meant for them).\n",
      after.parameters, after.padded_vocab - m.vocab_size, m.n_head, classifier.classifier_chunk_rows,
      after.padded_vocab, after.classifier_chunk_rows);
}

std::string Assumptions(const Plan& before, const Plan& after) {
  const DeviceProfile& d = after.device;
  double lowest = 1, highest = 0;  // the GEMMs' rates against the large-GEMM rate
  for (const OpCost& op : after.stages[0].ops) {
    if (op.op_class != OpClass::kGemm) continue;
    lowest = std::min(lowest, op.flops / op.seconds / after.matmul_rate);
    highest = std::max(highest, op.flops / op.seconds / after.matmul_rate);
  }
  return absl::StrFormat(
      "- **GEMMs** (every Linear forward, weight gradient and input gradient, and the classifier's): %.0f TFLOP/s "
      "for an 8192^3 bf16 GEMM, measured by this workplace on 2026-11-13 through PyTorch on an H100 80GB HBM3 "
      "(%.0f%% of the %.1f TFLOP/s dense peak, which the plan keeps for MFU). A GEMM's time is its FLOPs at "
      "%.0f TFLOP/s of math plus its own operand and result bytes at the bandwidth below, not overlapped; %.0f "
      "TFLOP/s is what reproduces the measured %.0f at 8192^3 under that rule. So a GEMM's efficiency follows from "
      "its arithmetic intensity I (FLOP per byte moved): I / (I + %.0f). GPT-2's GEMMs have a dimension of 768 and "
      "run at %.0f-%.0f%% of the measured rate (table below); the classifier's chunked weight gradient re-reads and "
      "re-writes the fp32 gradient [50304, 768] once per chunk. Before the issue a GEMM read the same 16-bit "
      "operands (converted copies) and wrote fp32.\n"
      "- **Attention**, FLOPs as executed: QK^T and PV in the forward, causal halving every product; cuDNN's "
      "backward recomputes the scores (5 products: 7 L T C FLOPs per token in all), our fp32 kernels' two backward "
      "passes recompute the scores and dP each (7 products: 9 L T C). After: cuDNN's flash attention (bf16, head "
      "size 64; cuDNN trains up to 256 on Hopper) at %.2f of the large-GEMM rate, %.0f TFLOP/s: the "
      "FlashAttention-3 paper (Shah et al., 2024) charts cuDNN on an H100 SXM5 at head size 64 and sequence 1k at "
      "roughly 290 TFLOP/s forward with a causal mask and 370 without, and the backward runs slower than the "
      "forward. Before: our fp32 flash kernels on CUDA cores at %.2f of the %.1f TFLOP/s fp32 peak, %.1f TFLOP/s: "
      "one thread per row kept the FMA pipes at best about 80%% busy (a shared load per four FMAs), and before "
      "the issue the kernel-resources table (as of the parent of commit 2a0ee49, which restructured these kernels) "
      "listed 226-255 registers per thread, 8 warps per SM (12.5%% occupancy) and backward kernels that spilled.\n"
      "- **Memory-bound ops** at %.2f TB/s: this workplace's device-to-device copy on the H100, counting bytes read "
      "and written (the SXM5 peak is 3.35 TB/s). Bytes each op reads and writes, per token and layer, with a "
      "bytes per activation element (before 4, after 2): LayerNorm forward 2aC + 8, with the residual add 4aC + 8, "
      "backward (dbeta's column sum, the kernel, dgamma's fp32 dy*xhat written and summed) (5a + 8)C + 8; residual "
      "add 3aC; GELU backward 12aC (its forward is the GEMM's epilogue); bias gradients 9aC; softmax "
      "cross-entropy 2aV + 4 (one read, one write per logit); embedding 8C + aC + 4 forward and aC + 16C + 4 "
      "backward (fp32 tables and gradients). Per step: AdamW 28 B per stored parameter, the gradient norm 4 and "
      "zeroing 4; after: the bf16 copies 6 B per GEMM operand. Before: every GEMM converted both operands (read 4, "
      "write 2 per element) and rounded its result in place (read 4, write 4; gradients: read 4 + 4, write 4; "
      "the GELU epilogue's two outputs 16).\n"
      "- **Not counted in the time**: kernel launch gaps (the trainer runs its steps in CUDA graphs), overlap "
      "between kernels (none is assumed), evaluation, checkpoints and data loading. One GPU: no all-reduce. %s "
      "rates: %s.\n",
      d.large_gemm_bf16 / 1e12, 100.0 * d.large_gemm_bf16 / d.peak_bf16, d.peak_bf16 / 1e12,
      after.gemm_math_rate / 1e12, after.gemm_math_rate / 1e12, d.large_gemm_bf16 / 1e12,
      after.gemm_math_rate / after.memory_bandwidth, 100.0 * lowest, 100.0 * highest, d.cudnn_attention_fraction,
      after.attention_rate / 1e12,
      d.fp32_flash_efficiency, d.peak_fp32 / 1e12, before.attention_rate / 1e12, after.memory_bandwidth / 1e12,
      d.name, d.rates_source);
}

}  // namespace

absl::StatusOr<std::string> PredictedProfileSection(const ProfileNotesOptions& options) {
  ASSIGN_OR_RETURN(DeviceProfile device, FindDevice(options.gpu));
  ASSIGN_OR_RETURN(v1::JobSpec spec, LoadJobSpecFile(options.spec));
  ASSIGN_OR_RETURN(Plan own, PlanJobSpec(spec, device, {}));
  ASSIGN_OR_RETURN(TrainerConfig config, TrainerConfigFromSpec(spec));
  std::vector<int64_t> batches = {own.micro_batch};
  for (int64_t b : options.micro_batches)
    if (std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
  std::vector<std::vector<Plan>> plans;  // [batch][design]
  for (int64_t b : batches) {
    ASSIGN_OR_RETURN(v1::JobSpec sized, LoadJobSpecFile(options.spec, {absl::StrCat("data.batch_size=", b)}));
    plans.emplace_back();
    for (const Design& design : Designs()) {
      ASSIGN_OR_RETURN(Plan p, PlanJobSpec(sized, device, design.options));
      if (p.stages.size() != 1 || p.stages[0].ops.empty())
        return absl::InvalidArgumentError("the predicted profile needs one stage on a GPU with rates");
      plans.back().push_back(std::move(p));
    }
  }
  const Plan& before = plans[0][0];
  const Plan& after = plans[0][2];
  std::string out = absl::StrCat(
      kProfileBegin, "\n",
      "<!-- Written by `bazel run //engine/plan:gpu_profile_notes -- --update`; //engine/plan:gpu_profile_notes_test "
      "fails when it is stale. -->\n\n",
      "## Predicted: ", options.spec, " on ", device.description, ", before and after issue #25\n\n");
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "What `ringmaster plan` predicts (engine/plan) for %s (%d parameters, %s, one GPU) at micro-batch %d "
          "(the spec's)%s, for three designs (`PlanOptions` in engine/plan/plan.h):\n\n",
          options.spec, after.parameters, after.precision, batches[0],
          batches.size() > 1
              ? absl::StrCat(" and ", absl::StrJoin(std::vector<int64_t>(batches.begin() + 1, batches.end()), ", "),
                             " (bench/gpu_vs_pytorch.sh tries 64 first, then smaller batches)")
              : ""),
      "- **before**: the engine before the issue: fp32 activations; both operands of every GEMM converted to 16 "
      "bits on each call and every GEMM result rounded in an extra pass; attention in our fp32 flash kernels; the "
      "whole logits and their gradient in fp32.\n"
      "- **classifier alone**: before, with the fused, chunked classifier (vocabulary padded to ",
      after.padded_vocab,
      "; one chunk of logits turned into their gradient in place; the head's input gradient kept from the forward "
      "to the backward).\n"
      "- **after**: the classifier and 16-bit storage: bf16 activations and activation gradients, a bf16 copy of "
      "every GEMM operand made once per step, cuDNN's flash attention: the design the engine implements from this "
      "issue on.\n\n",
      "Reproduce: `bazel run //engine/plan:gpu_profile_notes` prints this section; `ringmaster plan ", options.spec,
      " --gpu ", device.name, " -o json` the after column at micro-batch ", batches[0],
      " (`--set data.batch_size=N` for another), with each op in `stages[0].ops`.\n\n",
      "### Memory\n\n", MemoryTable(batches, plans), "\n", "### Step time by op class\n\n");
  for (size_t i = 0; i < batches.size(); ++i) absl::StrAppend(&out, TimeTable(batches[i], plans[i]), "\n");
  absl::StrAppend(&out, "### Assumptions\n\n", MemoryAssumptions(config.model, plans[0][1], after),
                  Assumptions(before, after), "\n", GemmTable(after), "\n",
                  "### What the GPU run should check\n\n"
                  "- tokens/s of bench/gpu_vs_pytorch.sh at its batch against the after column (and the "
                  "peak it prints, `peak_memory_bytes`, against the after peak: the plan counts tensors, the "
                  "caching allocator also holds freed blocks);\n"
                  "- an `nsys` profile of a few steps summed by kernel into these classes: the GEMM share and "
                  "the per-GEMM rates above (the efficiency model), the attention time (the assumed cuDNN "
                  "fraction), and the memory-bound classes against bytes / 3.0 TB/s (no launch gaps counted).\n",
                  kProfileEnd, "\n");
  return out;
}

std::string ProfileSectionOf(absl::string_view document) {
  const size_t begin = document.find(kProfileBegin);
  if (begin == absl::string_view::npos) return "";
  const size_t end = document.find(kProfileEnd, begin);
  if (end == absl::string_view::npos) return "";
  size_t stop = end + kProfileEnd.size();
  if (stop < document.size() && document[stop] == '\n') ++stop;
  return std::string(document.substr(begin, stop - begin));
}

std::string ReplaceProfileSection(absl::string_view document, absl::string_view section) {
  const std::string current = ProfileSectionOf(document);
  if (current.empty()) {
    std::string out(document);
    if (!out.empty() && out.back() != '\n') out += "\n";
    if (!out.empty()) out += "\n";
    return absl::StrCat(out, section);
  }
  const size_t begin = document.find(kProfileBegin);
  return absl::StrCat(document.substr(0, begin), section, document.substr(begin + current.size()));
}

}  // namespace ringmaster::engine::plan
