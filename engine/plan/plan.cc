#include "engine/plan/plan.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/optim/optimizer_config.h"
#include "engine/parallel/stage_partition_cost.h"
#include "engine/plan/plan_memory.h"
#include "engine/plan/plan_time.h"

namespace ringmaster::engine::plan {
namespace {

using internal::BlockCost;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr double kF32 = 4.0;            // weights, gradients, optimizer state, input batches
constexpr int kHostPrefetch = 4;        // DataLoaderOptions::prefetch
constexpr int64_t kFashionMnistTrain = 60000;

// This workplace's measurements on an H100 80GB HBM3 (2026-11-13): an
// 8192^3 bf16 GEMM through PyTorch, and a device-to-device copy counting the
// bytes read and written. Devices without measurements scale their peaks by
// the same fractions.
constexpr double kH100LargeGemmBf16 = 798e12;
constexpr double kH100PeakBf16 = 989.4e12;
constexpr double kH100Bandwidth = 3.0e12;
constexpr double kH100PeakBandwidth = 3.35e12;
// Assumed (bench/GPU_NOTES.md says why): cuDNN flash attention at GPT-2's
// shapes (head size 64, 1k causal) against the large-GEMM rate, and our fp32
// flash kernels against the fp32 peak.
constexpr double kCudnnAttentionFraction = 0.3;
constexpr double kFp32FlashEfficiency = 0.25;

std::string PrecisionName(const TrainerConfig& c) {
  switch (c.compute_dtype) {
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    default: return c.device == Device::kCuda && c.tf32 ? "tf32" : "fp32";
  }
}

double PeakFor(const DeviceProfile& d, const std::string& precision) {
  if (precision == "bf16") return d.peak_bf16;
  if (precision == "fp16") return d.peak_fp16;
  if (precision == "tf32") return d.peak_tf32;
  return d.peak_fp32;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

DeviceProfile CpuProfile() {
  DeviceProfile d;
  d.name = "cpu";
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  d.description = absl::StrFormat("this machine's CPU (%d cores, AVX2 FMA at 2.5 GHz assumed)", static_cast<int>(cores));
  d.peak_fp32 = d.peak_tf32 = d.peak_bf16 = d.peak_fp16 = cores * 2.5e9 * 32.0;
  d.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  d.nvlink_bytes_per_second = d.network_bytes_per_second = 5e9;  // Gloo over loopback
  return d;
}

// The measured rates, or the peaks scaled by the H100's measured fractions.
void SetRates(DeviceProfile& d, double peak_bandwidth, bool measured) {
  d.large_gemm_bf16 = d.peak_bf16 * (kH100LargeGemmBf16 / kH100PeakBf16);
  d.memory_bytes_per_second = peak_bandwidth * (kH100Bandwidth / kH100PeakBandwidth);
  d.cudnn_attention_fraction = kCudnnAttentionFraction;
  d.fp32_flash_efficiency = kFp32FlashEfficiency;
  d.rates_source = measured ? "measured on an H100 80GB HBM3 (8192^3 bf16 GEMM through PyTorch; device-to-device "
                              "copy, bytes read + written)"
                            : absl::StrFormat("the H100's measured fractions of the peaks (%.1f%% of the bf16 "
                                              "peak, %.1f%% of %.2f TB/s)",
                                              100.0 * kH100LargeGemmBf16 / kH100PeakBf16,
                                              100.0 * kH100Bandwidth / kH100PeakBandwidth, peak_bandwidth / 1e12);
}

}  // namespace

std::vector<std::string> DeviceNames() { return {"h100", "h200", "a100", "cpu"}; }

absl::StatusOr<DeviceProfile> FindDevice(absl::string_view name) {
  const std::string key = absl::AsciiStrToLower(std::string(name));
  DeviceProfile d;
  d.name = key;
  d.reserved_bytes = kGiB;
  d.flash_attention = true;
  if (key == "h100" || key == "h200") {
    // Dense tensor-core peaks of the SXM parts; NVLink 4 (900 GB/s both ways);
    // one 400 Gb/s ConnectX-7 per GPU (DGX H100/H200). The H200 has the
    // H100's compute and 4.8 TB/s of HBM3e.
    d.peak_bf16 = d.peak_fp16 = kH100PeakBf16;
    d.peak_tf32 = 494.7e12;
    d.peak_fp32 = 66.9e12;
    d.nvlink_bytes_per_second = 450e9;
    d.network_bytes_per_second = 50e9;
    d.memory_bytes = (key == "h100" ? 81559 : 143771) * kMiB;
    d.description = key == "h100" ? "NVIDIA H100 SXM5 80 GB" : "NVIDIA H200 SXM 141 GB";
    SetRates(d, key == "h100" ? kH100PeakBandwidth : 4.8e12, key == "h100");
    d.cudnn_attention_max_head_size = 256;
    return d;
  }
  if (key == "a100") {
    d.peak_bf16 = d.peak_fp16 = 312e12;
    d.peak_tf32 = 156e12;
    d.peak_fp32 = 19.5e12;
    d.nvlink_bytes_per_second = 300e9;
    d.network_bytes_per_second = 25e9;  // one 200 Gb/s HDR HCA per GPU (DGX A100)
    d.memory_bytes = 81920 * kMiB;
    d.description = "NVIDIA A100 SXM4 80 GB";
    SetRates(d, 2.039e12, false);
    d.cudnn_attention_max_head_size = 128;  // Ampere: the backward's limit
    return d;
  }
  if (key == "cpu") return CpuProfile();
  return absl::InvalidArgumentError(
      absl::StrCat("--gpu: unknown device \"", name, "\"; expected ", absl::StrJoin(DeviceNames(), ", ")));
}

int64_t ModelParameters(const nn::ModelConfig& model) {
  int64_t n = 0;
  for (const BlockCost& b : internal::Blocks(model, internal::ReferenceStorage(model))) n += b.parameters;
  return n;
}

std::vector<double> BlockForwardFlopsPerSample(const nn::ModelConfig& model) {
  std::vector<double> flops;
  for (const BlockCost& b : internal::Blocks(model, internal::ReferenceStorage(model)))
    flops.push_back(b.forward_flops);
  return flops;
}

double TrainingFlopsPerSample(const nn::ModelConfig& model, int begin, int end) {
  const std::vector<BlockCost> blocks = internal::Blocks(model, internal::ReferenceStorage(model));
  const int n = static_cast<int>(blocks.size());
  end = end < 0 ? n : std::min(end, n);
  double forward = 0;
  for (int i = std::max(begin, 0); i < end; ++i) forward += blocks[i].forward_flops;
  const double logits = model.kind == nn::ModelKind::kGpt ? static_cast<double>(model.block_size * model.vocab_size)
                                                          : static_cast<double>(model.num_classes);
  const double loss = end == n ? 5.0 * logits : 0.0;  // 5 per logit
  return 3.0 * forward + loss;
}

absl::StatusOr<DeviceProfile> DeviceForCudaName(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  for (const std::string& key : {"h200", "h100", "a100"}) {
    if (lower.find(key) != std::string::npos) return FindDevice(key);
  }
  return absl::NotFoundError(absl::StrCat("no peak rates known for \"", name, "\""));
}

double PeakFlops(const DeviceProfile& device, const TrainerConfig& config) { return PeakFor(device, PrecisionName(config)); }

namespace {

// What MakePlan's stages share.
struct Context {
  const TrainerConfig& config;
  const internal::Storage& storage;
  const internal::Rates& rates;
  const std::vector<BlockCost>& blocks;
  int64_t model_elements = 0;   // stored parameter elements of the whole model (padding included)
  int64_t model_operands = 0;   // of which GEMM/conv operands
  bool gpt = false, on_gpu = false, profile = false;
  int64_t micro_batch = 0;
};

// Fills st's memory and (with rates) its op profile; st's blocks, stage index
// and in_flight are set. Returns the stored elements the stage trains.
int64_t PlanStage(const Context& cx, const Plan& plan, StagePlan& st) {
  const TrainerConfig& config = cx.config;
  const ParallelConfig& par = config.parallel;
  const nn::ModelConfig& model = config.model;
  const double b = static_cast<double>(cx.micro_batch);
  const bool last = st.stage == par.pipeline - 1;
  double saved = 0;
  int64_t elements = 0, operands = 0;
  for (int i = st.begin_block; i < st.end_block; ++i) {
    st.parameters += cx.blocks[i].parameters;
    elements += cx.blocks[i].parameters + cx.blocks[i].padding;
    operands += cx.blocks[i].operands;
    st.forward_flops_per_sample += cx.blocks[i].forward_flops;
    saved += cx.blocks[i].saved;
  }
  // The last stage also trains the tied embedding (its head uses it).
  if (cx.gpt && model.tie_embeddings && last && st.begin_block > 0) {
    st.parameters += model.vocab_size * model.n_embd;
    elements += model.vocab_size * model.n_embd + cx.blocks[0].padding;
    operands += cx.blocks[0].operands;
  }
  // The backward runs the blocks last to first and frees each one's cache as
  // it goes: while block i works on its two largest buffers (and scratch),
  // the caches of the blocks after it are gone already.
  const double scratch = internal::BackwardScratchBytes(model, cx.storage, cx.micro_batch);
  double transient = 0, freed = 0;
  for (int i = st.end_block - 1; i >= st.begin_block; --i) {
    const bool layer = cx.gpt && i >= 1 && i <= model.n_layer;
    transient = std::max(transient, 2.0 * cx.blocks[i].largest * b + (layer ? scratch : 0.0) - freed);
    freed += cx.blocks[i].saved * b;
  }
  if (st.stage > 0) saved += cx.blocks[st.begin_block - 1].output;  // the received activations it keeps

  const int slots = static_cast<int>(optim::StateSlotNames(config.optimizer).size());
  const double wire = par.compression == parallel::GradCompression::kNone ? 4.0 : 2.0;
  MemoryBreakdown& m = st.memory;
  // Every rank builds the whole model: weights, copies and gradients of every block.
  m.weights = static_cast<int64_t>(kF32 * (cx.model_elements + internal::BufferElements(model)));
  m.weight_copies = cx.storage.operand_copies ? static_cast<int64_t>(2.0 * cx.model_operands) : 0;
  m.gradients = static_cast<int64_t>(kF32 * cx.model_elements);
  const int64_t optimized = plan.zero1 ? CeilDiv(elements, par.data) : elements;
  m.optimizer_state = static_cast<int64_t>(kF32 * slots * optimized);
  if (plan.zero1) {
    m.gradient_buffers = static_cast<int64_t>(kF32 * (optimized * par.data + optimized));
  } else if (par.data > 1) {
    m.gradient_buffers = static_cast<int64_t>(wire * elements);
  }
  m.activations = static_cast<int64_t>(saved * b * st.in_flight);
  if (last) m.logits = static_cast<int64_t>(internal::ClassifierBytes(model, cx.storage, cx.micro_batch, st.in_flight));
  if (st.stage == 0) {
    // CPU: the step's batch and the loader's prefetch queue; GPU: the
    // micro-batch on the device (the rest waits in pinned host memory).
    const double sample_in = cx.gpt ? 2.0 * model.block_size  // tokens and targets
                                    : static_cast<double>(model.input_channels * model.input_height *
                                                          model.input_width) + 1.0;
    const double samples = cx.on_gpu ? b : b * par.micro_batches * (kHostPrefetch + 1);
    m.batches = static_cast<int64_t>(kF32 * sample_in * samples);
  }
  // The fused classifier's chunk buffer and this micro-batch's dh are freed
  // before the layers' backward starts: the backward needs only what its
  // transients exceed them by.
  const double classifier_freed =
      last && cx.storage.fused_classifier ? internal::ClassifierBytes(model, cx.storage, cx.micro_batch, 1) : 0.0;
  m.transients = static_cast<int64_t>(std::max(0.0, transient - classifier_freed));

  if (!cx.profile) return elements;
  const std::vector<OpCost> micro =
      internal::MicroBatchOps(model, cx.storage, cx.rates, st.begin_block, st.end_block, cx.micro_batch);
  const std::vector<OpCost> step = internal::OptimizerOps(config, cx.storage, cx.rates, optimized, elements, operands);
  for (const OpCost& op : micro) st.micro_batch_seconds += op.seconds;
  for (const OpCost& op : step) st.optimizer_seconds += op.seconds;
  internal::AddOps(micro, par.micro_batches, &st.ops);
  internal::AddOps(step, 1.0, &st.ops);
  for (const OpCost& op : st.ops) {
    OpClassTotal& t = st.by_class[static_cast<int>(op.op_class)];
    t.flops += op.flops;
    t.bytes += op.bytes;
    t.seconds += op.seconds;
  }
  return elements;
}

void AddDesignNotes(const TrainerConfig& config, const internal::Storage& s, Plan& plan) {
  const nn::ModelConfig& m = config.model;
  if (!s.gpu) {
    plan.notes.push_back("the CPU stores activations in fp32 (values rounded to the compute precision)");
  } else if (s.act == 2) {
    plan.notes.push_back(absl::StrCat("activations and their gradients are stored in 16 bits (", plan.precision,
                                      "); statistics, the saved attention, masks and the loss in fp32; each GEMM "
                                      "or conv operand parameter has a 16-bit copy made once per step"));
  } else if (s.per_gemm_conversions) {
    plan.notes.push_back("old design: fp32 activations, both operands of every GEMM converted to 16 bits and its "
                         "result rounded in extra passes");
  }
  if (m.kind == nn::ModelKind::kGpt) {
    const int64_t head_size = m.n_embd / std::max<int64_t>(m.n_head, 1);
    std::string why;
    switch (s.attention) {
      case internal::AttentionPath::kCudnnFlash:
        why = absl::StrCat("cuDNN flash attention (head size ", head_size, " <= ",
                           plan.device.cudnn_attention_max_head_size, ", cuDNN's limit on this architecture",
                           ") saves the logsumexp [B, H, T] in fp32");
        break;
      case internal::AttentionPath::kOwnFlash:
        why = absl::StrCat("our flash kernels (fp32 math on CUDA cores; head size ", head_size,
                           " <= 64) save the logsumexp [B, H, T] in fp32");
        break;
      case internal::AttentionPath::kUnfused:
        why = "unfused attention saves the probabilities [B, H, T, T] in fp32";
        break;
    }
    plan.notes.push_back(absl::StrCat("attention: ", why));
    if (s.fused_classifier) {
      const double chunk_bytes = s.act * plan.classifier_chunk_rows * s.classes;
      plan.notes.push_back(absl::StrFormat(
          "classifier: vocabulary %d padded to %d; chunks of %d rows (%.1f MiB) hold the logits and then their "
          "gradient, and the gradient of its input [B T, C] is held from the forward to the backward",
          m.vocab_size, s.classes, plan.classifier_chunk_rows, chunk_bytes / kMiB));
    }
  }
}

// What the engine's design saves on this plan's peak: 16-bit activation
// storage against fp32 activations (bf16/fp16 on a GPU), and the fused
// classifier against whole fp32 logits (the GPT), each the peak of the same
// plan without it. Only for the engine's design (the comparison plans leave
// a part out and add no notes of their own).
void AddSavingNotes(const TrainerConfig& config, int nodes, int ranks_per_node, const DeviceProfile& device,
                    const PlanOptions& options, int64_t steps_per_epoch, const internal::Storage& storage,
                    Plan& plan) {
  if (!options.sixteen_bit_storage || !options.fused_classifier) return;
  auto saving = [&](PlanOptions without, const char* what) {
    without.mfu = options.mfu;
    absl::StatusOr<Plan> other = MakePlan(config, nodes, ranks_per_node, device, without, steps_per_epoch);
    if (!other.ok() || other->peak_bytes <= plan.peak_bytes) return;
    plan.notes.push_back(absl::StrFormat("%s lowers the peak by %.2f GiB (%.2f GiB without it)", what,
                                         static_cast<double>(other->peak_bytes - plan.peak_bytes) / kGiB,
                                         static_cast<double>(other->peak_bytes) / kGiB));
  };
  if (storage.gpu && storage.act == 2) {
    PlanOptions fp32_activations = options;
    fp32_activations.sixteen_bit_storage = false;
    saving(fp32_activations, "16-bit activation storage");
  }
  if (config.model.kind == nn::ModelKind::kGpt) {
    PlanOptions whole_logits = options;
    whole_logits.fused_classifier = false;
    saving(whole_logits, "the fused, chunked classifier");
  }
}

void AddTimeNotes(const PlanOptions& options, Plan& plan) {
  if (plan.matmul_rate <= 0) return;
  plan.notes.push_back(absl::StrFormat(
      "step time by op class: GEMMs at %.0f TFLOP/s for a large %s GEMM, less by their shapes' operand traffic; "
      "attention (%s) at %.0f TFLOP/s; memory-bound ops at %.2f TB/s (%s)",
      plan.matmul_rate / 1e12, plan.precision, plan.attention.empty() ? "none" : plan.attention,
      plan.attention_rate / 1e12, plan.memory_bandwidth / 1e12, plan.device.rates_source));
  if (options.mfu > 0)
    plan.notes.push_back(absl::StrFormat("--mfu %.2f overrides the op-class profile for the step time", options.mfu));
}

}  // namespace

absl::StatusOr<Plan> MakePlan(const TrainerConfig& config, int nodes, int ranks_per_node,
                              const DeviceProfile& device, const PlanOptions& options, int64_t steps_per_epoch) {
  if (options.mfu != 0.0 && !(options.mfu > 0.0 && options.mfu <= 1.0))
    return absl::InvalidArgumentError(absl::StrCat("--mfu: must be in (0, 1], got ", options.mfu));
  const ParallelConfig& par = config.parallel;
  Plan plan;
  plan.device = device;
  plan.nodes = nodes;
  plan.ranks = nodes * ranks_per_node;
  plan.data = par.data;
  plan.pipeline = par.pipeline;
  plan.micro_batches = par.micro_batches;
  plan.zero1 = par.zero1 && par.data > 1;
  if (par.pipeline > 1) plan.schedule = par.schedule == parallel::ScheduleKind::kGpipe ? "gpipe" : "1f1b";
  if (plan.ranks != par.data * par.pipeline)
    return absl::InvalidArgumentError(absl::StrCat("resources: ", plan.ranks, " ranks for parallelism.data ",
                                                   par.data, " x parallelism.pipeline ", par.pipeline));
  plan.precision = PrecisionName(config);
  plan.peak_flops = PeakFor(device, plan.precision);
  const bool on_gpu = device.name != "cpu";
  // CPU ranks of a node share its cores (and its memory, below).
  if (!on_gpu) plan.peak_flops /= std::max(1, ranks_per_node);
  plan.global_batch = config.data.global_batch;
  plan.micro_batch = config.data.global_batch / (int64_t{par.data} * par.micro_batches);
  const bool gpt = config.model.kind == nn::ModelKind::kGpt;
  plan.tokens_per_sample = gpt ? config.model.block_size : 0;

  const internal::Storage storage = internal::StorageFor(config, device, options);
  const internal::Rates rates = internal::RatesFor(device, config, storage);
  const bool profile = rates.bandwidth > 0;
  plan.time_model = profile && options.mfu == 0.0 ? "op classes" : "mfu";
  plan.activation_bytes = static_cast<int>(storage.act);
  plan.weight_copies = storage.operand_copies;
  plan.fused_classifier = storage.fused_classifier;
  plan.padded_vocab = gpt ? storage.classes : 0;
  plan.classifier_chunk_rows = internal::ClassifierChunkRowsFor(config.model, storage, plan.micro_batch);
  if (gpt) plan.attention = internal::AttentionPathName(storage.attention);
  plan.matmul_rate = rates.large_gemm;
  plan.attention_rate = gpt ? rates.attention : 0;
  plan.memory_bandwidth = rates.bandwidth;
  plan.gemm_math_rate = rates.gemm_math;

  const std::vector<BlockCost> blocks = internal::Blocks(config.model, storage);
  Context cx{config, storage, rates, blocks};
  for (const BlockCost& b : blocks) {
    plan.parameters += b.parameters;
    cx.model_elements += b.parameters + b.padding;
    cx.model_operands += b.operands;
  }
  cx.gpt = gpt;
  cx.on_gpu = on_gpu;
  cx.profile = profile;
  cx.micro_batch = plan.micro_batch;
  const int num_blocks = static_cast<int>(blocks.size());

  parallel::StagePartition partition = {{0, num_blocks}};
  if (par.pipeline > 1) {
    ASSIGN_OR_RETURN(partition, parallel::PartitionModel(config.model, num_blocks, par.pipeline, par.stage_boundaries));
  }

  const double b = static_cast<double>(plan.micro_batch);
  const double wire = par.compression == parallel::GradCompression::kNone ? 4.0 : 2.0;
  const double mfu = options.mfu > 0.0 ? options.mfu : kDefaultMfu;
  double slowest_micro_batch_seconds = 0, sum_micro_batch_seconds = 0, optimizer_seconds = 0;
  int64_t largest_stage_grad_bytes = 0;
  for (int s = 0; s < par.pipeline; ++s) {
    StagePlan st;
    st.stage = s;
    st.begin_block = partition[s].begin;
    st.end_block = partition[s].end;
    if (par.pipeline == 1) {
      st.in_flight = 1;
    } else if (par.schedule == parallel::ScheduleKind::kGpipe) {
      st.in_flight = par.micro_batches;
    } else {
      st.in_flight = std::min(par.pipeline - s, par.micro_batches);
    }
    const int64_t trained = PlanStage(cx, plan, st);
    plan.peak_bytes = std::max(plan.peak_bytes, st.memory.total());
    largest_stage_grad_bytes = std::max(largest_stage_grad_bytes, static_cast<int64_t>(wire * trained));

    const double stage_step_flops = 3.0 * st.forward_flops_per_sample * b * par.micro_batches;
    plan.flops_per_step += stage_step_flops * par.data;
    const double micro_seconds = plan.time_model == "op classes"
                                     ? st.micro_batch_seconds
                                     : 3.0 * st.forward_flops_per_sample * b / (plan.peak_flops * mfu);
    if (plan.time_model == "op classes") optimizer_seconds = std::max(optimizer_seconds, st.optimizer_seconds);
    slowest_micro_batch_seconds = std::max(slowest_micro_batch_seconds, micro_seconds);
    sum_micro_batch_seconds += micro_seconds;
    plan.stages.push_back(std::move(st));
  }
  // The loss: 5 FLOPs per logit, forward only (its backward is the same pass).
  const double logits_per_sample = gpt ? static_cast<double>(config.model.block_size * config.model.vocab_size)
                                       : static_cast<double>(config.model.num_classes);
  plan.flops_per_step += 5.0 * logits_per_sample * config.data.global_batch;
  if (gpt) plan.flops_per_token = plan.flops_per_step / (config.data.global_batch * config.model.block_size);

  if (par.pipeline > 1) {
    plan.bubble_fraction = static_cast<double>(par.pipeline - 1) / (par.micro_batches + par.pipeline - 1);
    plan.compute_seconds = slowest_micro_batch_seconds * (par.micro_batches + par.pipeline - 1);
  } else {
    plan.compute_seconds = sum_micro_batch_seconds * par.micro_batches;
  }
  plan.compute_seconds += optimizer_seconds;
  plan.mfu = plan.time_model == "op classes"
                 ? plan.flops_per_step / plan.ranks / std::max(plan.compute_seconds, 1e-30) / plan.peak_flops
                 : mfu;
  if (par.data > 1) {
    const bool across_nodes = nodes > 1;
    const double bandwidth = across_nodes ? device.network_bytes_per_second : device.nvlink_bytes_per_second;
    const double n = par.data;
    plan.allreduce_seconds = 2.0 * (n - 1.0) / n * largest_stage_grad_bytes / bandwidth;
    if (plan.zero1) {
      plan.allreduce_exposed_seconds = plan.allreduce_seconds;  // reduce-scatter after the backward, then all-gather
    } else {
      const double buckets = std::max<double>(1.0, std::ceil(static_cast<double>(largest_stage_grad_bytes) /
                                                             std::max<int64_t>(par.bucket_bytes, 1)));
      const double backward = 2.0 / 3.0 * slowest_micro_batch_seconds;  // of the micro-batch that syncs
      plan.allreduce_exposed_seconds =
          std::max(plan.allreduce_seconds - backward, plan.allreduce_seconds / buckets);
    }
  }
  plan.step_seconds = plan.compute_seconds + plan.allreduce_exposed_seconds;
  plan.samples_per_second = plan.step_seconds > 0 ? config.data.global_batch / plan.step_seconds : 0;
  plan.tokens_per_second = plan.samples_per_second * plan.tokens_per_sample;
  plan.total_steps = config.steps > 0 ? config.steps : config.epochs * steps_per_epoch;
  plan.total_seconds = plan.total_steps * plan.step_seconds;

  plan.usable_bytes = device.memory_bytes - device.reserved_bytes;
  if (!on_gpu) {
    plan.usable_bytes /= std::max(1, ranks_per_node);
    plan.notes.push_back(absl::StrCat("the CPU ranks of a node share its cores and memory: each of the ",
                                      ranks_per_node, " rank(s) gets 1/", ranks_per_node));
  } else {
    plan.notes.push_back(absl::StrCat(device.reserved_bytes / kMiB,
                                      " MiB of each GPU is set aside for the CUDA context, library workspaces "
                                      "and NCCL buffers"));
  }
  plan.fits = plan.peak_bytes <= plan.usable_bytes;
  plan.headroom_bytes = plan.usable_bytes - plan.peak_bytes;
  AddDesignNotes(config, storage, plan);
  AddSavingNotes(config, nodes, ranks_per_node, device, options, steps_per_epoch, storage, plan);
  AddTimeNotes(options, plan);
  if (par.pipeline > 1)
    plan.notes.push_back("every pipeline rank holds the whole model's weights and gradients (rank 0 evaluates and "
                         "checkpoints it); the optimizer state is per stage");
  if (plan.total_steps == 0) plan.notes.push_back("time to the end unknown: the epoch length needs the dataset's size");
  if (on_gpu && plan.compute_seconds < 5e-3)
    plan.notes.push_back("a step this short is bound by kernel launches, which the plan does not count: its time is "
                         "a lower bound");
  plan.notes.push_back("times exclude evaluation, checkpoints and pipeline activation transfers");
  return plan;
}

absl::StatusOr<Plan> PlanJobSpec(const v1::JobSpec& spec, const DeviceProfile& device, const PlanOptions& options) {
  ASSIGN_OR_RETURN(TrainerConfig config, TrainerConfigFromSpec(spec));
  int64_t samples = 0;
  switch (config.data.kind) {
    case DatasetKind::kFashionMnist:
      samples = kFashionMnistTrain - static_cast<int64_t>(std::floor(kFashionMnistTrain * config.data.holdout_fraction));
      break;
    case DatasetKind::kSynthetic: samples = config.data.synthetic_samples; break;
    case DatasetKind::kText: {
      std::error_code error;
      const auto bytes = std::filesystem::file_size(config.data.path, error);
      if (!error) {
        const int64_t train = static_cast<int64_t>(bytes) -
                              static_cast<int64_t>(std::floor(bytes * config.data.holdout_fraction));
        samples = std::max<int64_t>(0, train - config.model.block_size);  // windows at stride 1
      }
      break;
    }
  }
  return MakePlan(config, spec.resources().nodes(), spec.resources().ranks_per_node(), device, options,
                  samples / std::max<int64_t>(config.data.global_batch, 1));
}

}  // namespace ringmaster::engine::plan
