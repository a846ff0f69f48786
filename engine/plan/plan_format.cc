// The plan as a table or JSON (plan.h's PlanTable, PlanJson).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/plan/plan.h"

namespace ringmaster::engine::plan {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr OpClass kClasses[kNumOpClasses] = {OpClass::kGemm,       OpClass::kAttention,    OpClass::kNormalization,
                                             OpClass::kElementwise, OpClass::kLoss,        OpClass::kEmbedding,
                                             OpClass::kOptimizer,  OpClass::kWeightCopies, OpClass::kConversions};

std::string Bytes(int64_t bytes) {
  if (bytes == 0) return "-";
  const double b = static_cast<double>(bytes);
  const double a = std::abs(b);
  if (a >= kGiB) return absl::StrFormat("%.2f GiB", b / kGiB);
  if (a >= kMiB) return absl::StrFormat("%.1f MiB", b / kMiB);
  return absl::StrFormat("%.1f KiB", b / 1024.0);
}

std::string Duration(double seconds) {
  if (seconds < 1e-3) return absl::StrFormat("%.1f us", seconds * 1e6);
  if (seconds < 1.0) return absl::StrFormat("%.1f ms", seconds * 1e3);
  if (seconds < 120.0) return absl::StrFormat("%.1f s", seconds);
  if (seconds < 7200.0) return absl::StrFormat("%.1f min", seconds / 60.0);
  return absl::StrFormat("%.1f h", seconds / 3600.0);
}

std::string Count(double n) {
  if (n >= 1e12) return absl::StrFormat("%.2f T", n / 1e12);
  if (n >= 1e9) return absl::StrFormat("%.2f G", n / 1e9);
  if (n >= 1e6) return absl::StrFormat("%.2f M", n / 1e6);
  if (n >= 1e3) return absl::StrFormat("%.1f k", n / 1e3);
  return absl::StrFormat("%.0f", n);
}

// One row of per-stage columns.
template <typename F>
std::string StageRow(const Plan& p, const std::string& name, F cell) {
  std::string line = absl::StrFormat("  %-24s", name);
  for (const StagePlan& s : p.stages) absl::StrAppend(&line, absl::StrFormat(" %14s", cell(s)));
  return absl::StrCat(line, "\n");
}

std::string MemorySection(const Plan& p) {
  std::string out = "\nmemory per rank\n";
  out += StageRow(p, "", [&](const StagePlan& s) {
    return p.stages.size() > 1 ? absl::StrCat("stage ", s.stage) : std::string("rank");
  });
  auto memory_row = [&](const std::string& name, int64_t MemoryBreakdown::*field) {
    out += StageRow(p, name, [&](const StagePlan& s) { return Bytes(s.memory.*field); });
  };
  memory_row("weights (fp32)", &MemoryBreakdown::weights);
  if (p.weight_copies) memory_row("weight copies (16-bit)", &MemoryBreakdown::weight_copies);
  memory_row("gradients (fp32)", &MemoryBreakdown::gradients);
  memory_row("optimizer state (fp32)", &MemoryBreakdown::optimizer_state);
  memory_row("gradient buffers", &MemoryBreakdown::gradient_buffers);
  memory_row(absl::StrCat("activations (", p.activation_bytes == 2 ? "16-bit" : "fp32", ")"),
             &MemoryBreakdown::activations);
  memory_row(p.fused_classifier ? "classifier chunk + dh" : "logits and their grad", &MemoryBreakdown::logits);
  memory_row("input batches", &MemoryBreakdown::batches);
  memory_row("backward transients", &MemoryBreakdown::transients);
  out += StageRow(p, "total", [](const StagePlan& s) { return Bytes(s.memory.total()); });
  if (p.stages.size() > 1) {
    out += StageRow(p, "blocks",
                    [](const StagePlan& s) { return absl::StrCat("[", s.begin_block, ", ", s.end_block, ")"); });
    out += StageRow(p, "micro-batches in flight", [](const StagePlan& s) { return absl::StrCat(s.in_flight); });
  }
  return out;
}

// The GPU profile: one row per op class that has work, per stage (a step of it).
std::string ProfileSection(const Plan& p) {
  if (p.stages.empty() || p.stages[0].ops.empty()) return "";
  std::string out = "\ntime per step by op class\n";
  for (OpClass c : kClasses) {
    const int i = static_cast<int>(c);
    bool any = false;
    for (const StagePlan& s : p.stages) any = any || s.by_class[i].seconds > 0;
    if (!any) continue;
    out += StageRow(p, std::string(OpClassName(c)),
                    [&](const StagePlan& s) { return Duration(s.by_class[i].seconds); });
  }
  out += StageRow(p, "sum", [](const StagePlan& s) {
    double total = 0;
    for (const OpClassTotal& t : s.by_class) total += t.seconds;
    return Duration(total);
  });
  return out;
}

}  // namespace

absl::string_view OpClassName(OpClass c) {
  switch (c) {
    case OpClass::kGemm: return "GEMMs";
    case OpClass::kAttention: return "attention";
    case OpClass::kNormalization: return "normalization";
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kLoss: return "softmax cross-entropy";
    case OpClass::kEmbedding: return "embedding";
    case OpClass::kOptimizer: return "optimizer";
    case OpClass::kWeightCopies: return "weight copies";
    case OpClass::kConversions: return "conversions, rounding";
  }
  return "";
}

absl::string_view OpClassKey(OpClass c) {
  switch (c) {
    case OpClass::kGemm: return "gemm";
    case OpClass::kAttention: return "attention";
    case OpClass::kNormalization: return "normalization";
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kLoss: return "loss";
    case OpClass::kEmbedding: return "embedding";
    case OpClass::kOptimizer: return "optimizer";
    case OpClass::kWeightCopies: return "weight_copies";
    case OpClass::kConversions: return "conversions";
  }
  return "";
}

std::string PlanTable(const Plan& p) {
  std::string out;
  auto row = [&out](const std::string& key, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("%-28s %s\n", key, value));
  };
  row("device", absl::StrCat(p.device.description, ", ", p.precision, " peak ", Count(p.peak_flops), "FLOP/s per rank"));
  row("layout", absl::StrCat(p.ranks, " rank(s) on ", p.nodes, " node(s): data ", p.data, " x pipeline ", p.pipeline,
                             p.pipeline > 1 ? absl::StrCat(" (", p.schedule, ")") : "", ", ", p.micro_batches,
                             " micro-batch(es) of ", p.micro_batch, p.zero1 ? ", ZeRO-1" : ""));
  row("parameters", absl::StrCat(Count(static_cast<double>(p.parameters)), " (", p.parameters, ")"));
  absl::StrAppend(&out, MemorySection(p), ProfileSection(p));
  absl::StrAppend(&out, "\ntime (",
                  p.time_model == "op classes" ? absl::StrFormat("op classes; %.0f%% MFU implied", p.mfu * 100)
                                               : absl::StrFormat("at %.0f%% MFU", p.mfu * 100),
                  ")\n");
  row("  FLOPs per step", absl::StrCat(Count(p.flops_per_step), "FLOP",
                                       p.flops_per_token > 0 ? absl::StrCat(" (", Count(p.flops_per_token),
                                                                            "FLOP per token)")
                                                             : ""));
  row("  compute per step", Duration(p.compute_seconds));
  if (p.pipeline > 1) row("  pipeline bubble", absl::StrFormat("%.1f%% of the step", p.bubble_fraction * 100));
  if (p.data > 1)
    row("  gradient all-reduce", absl::StrCat(Duration(p.allreduce_seconds), " (", Duration(p.allreduce_exposed_seconds),
                                              " not hidden by the backward)"));
  row("  step", Duration(p.step_seconds));
  row("  throughput", p.tokens_per_second > 0
                          ? absl::StrCat(Count(p.tokens_per_second), " tokens/s (", Count(p.samples_per_second),
                                         " samples/s)")
                          : absl::StrCat(Count(p.samples_per_second), " samples/s"));
  row("  to the end", p.total_steps > 0 ? absl::StrCat(Duration(p.total_seconds), " (", p.total_steps, " steps)")
                                        : "unknown");
  absl::StrAppend(&out, "\n");
  row("verdict", p.fits ? absl::StrCat("fits: ", Bytes(p.peak_bytes), " of ", Bytes(p.usable_bytes), " per rank, ",
                                       Bytes(p.headroom_bytes), " headroom")
                        : absl::StrCat("does not fit: ", Bytes(p.peak_bytes), " needed, ", Bytes(p.usable_bytes),
                                       " usable per rank (short by ", Bytes(-p.headroom_bytes), ")"));
  for (const std::string& note : p.notes) absl::StrAppend(&out, "note: ", note, "\n");
  return out;
}

std::string PlanJson(const Plan& p) {
  auto memory = [](const MemoryBreakdown& m) {
    return absl::StrFormat(
        "{\"weights\":%d,\"weight_copies\":%d,\"gradients\":%d,\"optimizer_state\":%d,\"gradient_buffers\":%d,"
        "\"activations\":%d,\"logits\":%d,\"batches\":%d,\"transients\":%d,\"model_states\":%d,\"total\":%d}",
        m.weights, m.weight_copies, m.gradients, m.optimizer_state, m.gradient_buffers, m.activations, m.logits,
        m.batches, m.transients, m.model_states(), m.total());
  };
  auto profile = [](const StagePlan& s) {
    std::vector<std::string> classes, ops;
    for (OpClass c : kClasses) {
      const OpClassTotal& t = s.by_class[static_cast<int>(c)];
      classes.push_back(absl::StrFormat("\"%s\":{\"seconds\":%.6g,\"flops\":%.6g,\"bytes\":%.6g}", OpClassKey(c),
                                        t.seconds, t.flops, t.bytes));
    }
    for (const OpCost& op : s.ops) {
      ops.push_back(absl::StrFormat("{\"name\":\"%s\",\"class\":\"%s\",\"seconds\":%.6g,\"flops\":%.6g,\"bytes\":%.6g}",
                                    op.name, OpClassKey(op.op_class), op.seconds, op.flops, op.bytes));
    }
    return absl::StrFormat("\"micro_batch_seconds\":%.6g,\"optimizer_seconds\":%.6g,\"op_classes\":{%s},\"ops\":[%s]",
                           s.micro_batch_seconds, s.optimizer_seconds, absl::StrJoin(classes, ","),
                           absl::StrJoin(ops, ","));
  };
  std::vector<std::string> stages;
  for (const StagePlan& s : p.stages) {
    stages.push_back(absl::StrFormat(
        "{\"stage\":%d,\"begin_block\":%d,\"end_block\":%d,\"parameters\":%d,\"in_flight\":%d,"
        "\"forward_flops_per_sample\":%.6g,\"memory_bytes\":%s,%s}",
        s.stage, s.begin_block, s.end_block, s.parameters, s.in_flight, s.forward_flops_per_sample,
        memory(s.memory), profile(s)));
  }
  std::vector<std::string> notes;
  for (const std::string& n : p.notes) notes.push_back(absl::StrCat("\"", n, "\""));
  const std::string design = absl::StrFormat(
      "\"activation_bytes\":%d,\"weight_copies\":%s,\"fused_classifier\":%s,\"padded_vocab\":%d,"
      "\"classifier_chunk_rows\":%d,\"attention\":\"%s\",\"time_model\":\"%s\",\"matmul_rate\":%.6g,"
      "\"attention_rate\":%.6g,\"memory_bandwidth\":%.6g,\"gemm_math_rate\":%.6g",
      p.activation_bytes, p.weight_copies ? "true" : "false", p.fused_classifier ? "true" : "false", p.padded_vocab,
      p.classifier_chunk_rows, p.attention, p.time_model, p.matmul_rate, p.attention_rate, p.memory_bandwidth,
      p.gemm_math_rate);
  return absl::StrFormat(
      "{\"device\":\"%s\",\"precision\":\"%s\",\"peak_flops\":%.6g,\"mfu\":%.6g,\"nodes\":%d,\"ranks\":%d,"
      "\"data\":%d,\"pipeline\":%d,\"micro_batches\":%d,\"schedule\":\"%s\",\"zero1\":%s,\"parameters\":%d,"
      "\"global_batch\":%d,\"micro_batch\":%d,\"tokens_per_sample\":%d,%s,\"stages\":[%s],\"peak_bytes\":%d,"
      "\"usable_bytes\":%d,\"fits\":%s,\"headroom_bytes\":%d,\"flops_per_step\":%.6g,\"flops_per_token\":%.6g,"
      "\"compute_seconds\":%.6g,\"allreduce_seconds\":%.6g,\"allreduce_exposed_seconds\":%.6g,"
      "\"bubble_fraction\":%.6g,\"step_seconds\":%.6g,\"samples_per_second\":%.6g,\"tokens_per_second\":%.6g,"
      "\"total_steps\":%d,\"total_seconds\":%.6g,\"notes\":[%s]}",
      p.device.name, p.precision, p.peak_flops, p.mfu, p.nodes, p.ranks, p.data, p.pipeline, p.micro_batches,
      p.schedule, p.zero1 ? "true" : "false", p.parameters, p.global_batch, p.micro_batch, p.tokens_per_sample,
      design, absl::StrJoin(stages, ","), p.peak_bytes, p.usable_bytes, p.fits ? "true" : "false", p.headroom_bytes,
      p.flops_per_step, p.flops_per_token, p.compute_seconds, p.allreduce_seconds, p.allreduce_exposed_seconds,
      p.bubble_fraction, p.step_seconds, p.samples_per_second, p.tokens_per_second, p.total_steps, p.total_seconds,
      absl::StrJoin(notes, ","));
}

}  // namespace ringmaster::engine::plan
