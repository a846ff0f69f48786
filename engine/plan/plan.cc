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
#include "engine/kernels/flash_limits.h"
#include "engine/optim/optimizer_config.h"
#include "engine/parallel/stage_partition_cost.h"

namespace ringmaster::engine::plan {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr double kFloat = 4.0;          // every float tensor is stored as f32
constexpr int kHostPrefetch = 4;        // DataLoaderOptions::prefetch
constexpr int64_t kFashionMnistTrain = 60000;

// What one block costs per sample, in f32 elements (i32 tokens count alike).
struct BlockCost {
  int64_t parameters = 0;
  double forward_flops = 0;  // counted as stage_partition_cost.h counts
  double saved = 0;          // kept for the backward (its output included)
  double largest = 0;        // its largest activation
  double output = 0;         // what it hands to the next block
};

// Per conv stage or hidden layer, as model_factory.cc builds them.
std::vector<BlockCost> ImageBlocks(const nn::ModelConfig& m) {
  std::vector<BlockCost> blocks;
  const double drop = m.dropout > 0.0f ? 2.0 : 0.0;  // a mask and an output per element
  double features = static_cast<double>(m.input_channels * m.input_height * m.input_width);
  if (m.kind == nn::ModelKind::kCnn) {
    int64_t c = m.input_channels, h = m.input_height, w = m.input_width;
    for (int64_t out : m.conv_channels) {
      const double hw = static_cast<double>(h * w), k2 = static_cast<double>(m.kernel_size * m.kernel_size);
      const double pooled = static_cast<double>(out * (h / 2) * (w / 2));
      BlockCost b;
      b.parameters = c * out * m.kernel_size * m.kernel_size + 2 * out;
      // conv, batch norm (5 per element), ReLU, max-pool (one per input element).
      b.forward_flops = 2.0 * out * hw * c * k2 + (5.0 + 1.0 + 1.0) * out * hw;
      b.saved = 2.0 * out * hw + pooled;  // conv output (batch norm's input), ReLU output, pooled output
      b.largest = out * hw;
      b.output = pooled;
      blocks.push_back(b);
      c = out;
      h /= 2;
      w /= 2;
    }
    features = static_cast<double>(c * h * w);
  }
  const std::vector<int64_t>& hidden = m.kind == nn::ModelKind::kCnn ? m.cnn_hidden_sizes : m.hidden_sizes;
  for (int64_t size : hidden) {
    const double h = static_cast<double>(size);
    BlockCost b;
    b.parameters = static_cast<int64_t>(features) * size + size;
    b.forward_flops = 2.0 * features * h + h + h;  // GEMM, bias, ReLU (dropout is off in the eval forward)
    b.saved = h * (1.0 + drop);  // ReLU output (+ dropout mask and output; p = 0 keeps nothing)
    b.largest = h;
    b.output = h;
    blocks.push_back(b);
    features = h;
  }
  BlockCost out;
  out.parameters = static_cast<int64_t>(features) * m.num_classes + m.num_classes;
  out.forward_flops = 2.0 * features * m.num_classes + m.num_classes;
  out.largest = static_cast<double>(m.num_classes);
  out.output = static_cast<double>(m.num_classes);  // the logits: counted apart
  blocks.push_back(out);
  return blocks;
}

// Embedding, n_layer transformer blocks, final norm + head (gpt.cc).
std::vector<BlockCost> GptBlocks(const nn::ModelConfig& m, bool flash) {
  const double c = static_cast<double>(m.n_embd), t = static_cast<double>(m.block_size);
  const double heads = static_cast<double>(m.n_head), v = static_cast<double>(m.vocab_size);
  std::vector<BlockCost> blocks;
  BlockCost embedding;
  embedding.parameters = m.vocab_size * m.n_embd + m.block_size * m.n_embd;
  embedding.forward_flops = t * c;
  embedding.saved = embedding.largest = embedding.output = t * c;
  blocks.push_back(embedding);
  BlockCost layer;
  layer.parameters = 12 * m.n_embd * m.n_embd + 13 * m.n_embd;
  // Per token: ln_1 5C; c_attn 6C^2 + 3C; attention 4TC + 5HT; c_proj 2C^2 + C;
  // residual + ln_2 6C; c_fc + GELU 8C^2 + 8C; c_proj 8C^2 + C; residual C.
  layer.forward_flops = t * (24.0 * c * c + 25.0 * c + 4.0 * t * c + 5.0 * heads * t);
  // ln_1 out, qkv, attention out, residual sum, ln_2 out, GELU input and
  // output (4C each), block output: 16C; two means and rstds; the attention.
  const double attention = flash && kernels::FlashAttentionSupports(m.n_embd / m.n_head) ? heads : heads * t;
  layer.saved = t * (16.0 * c + 4.0 + attention);
  layer.largest = t * std::max(4.0 * c, attention);
  layer.output = t * c;
  for (int64_t i = 0; i < m.n_layer; ++i) blocks.push_back(layer);
  BlockCost head;
  head.parameters = 2 * m.n_embd + (m.tie_embeddings ? 0 : m.vocab_size * m.n_embd);
  head.forward_flops = t * (5.0 * c + 2.0 * v * c);
  head.saved = t * (c + 2.0);  // ln_f output and statistics; the logits are counted apart
  head.largest = t * c;        // its backward's buffers: dh and ln_f's dx (dlogits is the loss's)
  head.output = t * v;
  blocks.push_back(head);
  return blocks;
}

std::vector<BlockCost> Blocks(const nn::ModelConfig& m, bool flash) {
  return m.kind == nn::ModelKind::kGpt ? GptBlocks(m, flash) : ImageBlocks(m);
}

// Non-trainable state (BatchNorm running mean, variance and batch count).
int64_t BufferElements(const nn::ModelConfig& m) {
  if (m.kind != nn::ModelKind::kCnn) return 0;
  int64_t n = 0;
  for (int64_t c : m.conv_channels) n += 2 * c + 1;
  return n;
}

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
    // one 400 Gb/s ConnectX-7 per GPU (DGX H100/H200).
    d.peak_bf16 = d.peak_fp16 = 989.4e12;
    d.peak_tf32 = 494.7e12;
    d.peak_fp32 = 66.9e12;
    d.nvlink_bytes_per_second = 450e9;
    d.network_bytes_per_second = 50e9;
    d.memory_bytes = (key == "h100" ? 81559 : 143771) * kMiB;
    d.description = key == "h100" ? "NVIDIA H100 SXM5 80 GB" : "NVIDIA H200 SXM 141 GB";
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
    return d;
  }
  if (key == "cpu") return CpuProfile();
  return absl::InvalidArgumentError(
      absl::StrCat("--gpu: unknown device \"", name, "\"; expected ", absl::StrJoin(DeviceNames(), ", ")));
}

int64_t ModelParameters(const nn::ModelConfig& model) {
  int64_t n = 0;
  for (const BlockCost& b : Blocks(model, false)) n += b.parameters;
  return n;
}

std::vector<double> BlockForwardFlopsPerSample(const nn::ModelConfig& model) {
  std::vector<double> flops;
  for (const BlockCost& b : Blocks(model, false)) flops.push_back(b.forward_flops);
  return flops;
}

double TrainingFlopsPerSample(const nn::ModelConfig& model, int begin, int end) {
  const std::vector<BlockCost> blocks = Blocks(model, false);
  const int n = static_cast<int>(blocks.size());
  end = end < 0 ? n : std::min(end, n);
  double forward = 0;
  for (int i = std::max(begin, 0); i < end; ++i) forward += blocks[i].forward_flops;
  const double loss = end == n ? 5.0 * blocks.back().output : 0.0;  // 5 per logit
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

absl::StatusOr<Plan> MakePlan(const TrainerConfig& config, int nodes, int ranks_per_node,
                              const DeviceProfile& device, const PlanOptions& options, int64_t steps_per_epoch) {
  if (!(options.mfu > 0.0 && options.mfu <= 1.0))
    return absl::InvalidArgumentError(absl::StrCat("--mfu: must be in (0, 1], got ", options.mfu));
  const ParallelConfig& par = config.parallel;
  Plan plan;
  plan.device = device;
  plan.mfu = options.mfu;
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

  const std::vector<BlockCost> blocks = Blocks(config.model, on_gpu && device.flash_attention);
  for (const BlockCost& b : blocks) plan.parameters += b.parameters;
  const int num_blocks = static_cast<int>(blocks.size());

  parallel::StagePartition partition = {{0, num_blocks}};
  if (par.pipeline > 1) {
    ASSIGN_OR_RETURN(partition, parallel::PartitionModel(config.model, num_blocks, par.pipeline, par.stage_boundaries));
  }

  const double b = static_cast<double>(plan.micro_batch);
  const int slots = static_cast<int>(optim::StateSlotNames(config.optimizer).size());
  const double wire = par.compression == parallel::GradCompression::kNone ? 4.0 : 2.0;
  const double sample_in = gpt ? 2.0 * config.model.block_size  // tokens and targets
                               : static_cast<double>(config.model.input_channels * config.model.input_height *
                                                     config.model.input_width) + 1.0;
  const double logits_per_sample = gpt ? static_cast<double>(config.model.block_size * config.model.vocab_size)
                                       : static_cast<double>(config.model.num_classes);
  const int64_t model_elements = plan.parameters + BufferElements(config.model);

  double slowest_micro_batch_seconds = 0, sum_micro_batch_seconds = 0;
  int64_t largest_stage_grad_bytes = 0;
  for (int s = 0; s < par.pipeline; ++s) {
    StagePlan st;
    st.stage = s;
    st.begin_block = partition[s].begin;
    st.end_block = partition[s].end;
    double saved = 0;
    for (int i = st.begin_block; i < st.end_block; ++i) {
      st.parameters += blocks[i].parameters;
      st.forward_flops_per_sample += blocks[i].forward_flops;
      saved += blocks[i].saved;
    }
    // The backward runs the blocks last to first and frees each one's cache as
    // it goes: while block i works on its two largest buffers, the caches of
    // the blocks after it are gone already.
    double transient = 0, freed = 0;
    for (int i = st.end_block - 1; i >= st.begin_block; --i) {
      transient = std::max(transient, 2.0 * blocks[i].largest - freed);
      freed += blocks[i].saved;
    }
    const bool last = s == par.pipeline - 1;
    // The last stage also trains the tied embedding (its head uses it).
    if (gpt && config.model.tie_embeddings && last && st.begin_block > 0)
      st.parameters += config.model.vocab_size * config.model.n_embd;
    if (s > 0) saved += blocks[st.begin_block - 1].output;  // the received activations it keeps
    if (par.pipeline == 1) {
      st.in_flight = 1;
    } else if (par.schedule == parallel::ScheduleKind::kGpipe) {
      st.in_flight = par.micro_batches;
    } else {
      st.in_flight = std::min(par.pipeline - s, par.micro_batches);
    }
    MemoryBreakdown& m = st.memory;
    // Every rank builds the whole model: weights and gradients of every block.
    m.weights = static_cast<int64_t>(kFloat * model_elements);
    m.gradients = static_cast<int64_t>(kFloat * plan.parameters);
    const int64_t optimized = plan.zero1 ? CeilDiv(st.parameters, par.data) : st.parameters;
    m.optimizer_state = static_cast<int64_t>(kFloat * slots * optimized);
    if (plan.zero1) {
      m.gradient_buffers = static_cast<int64_t>(kFloat * (optimized * par.data + optimized));
    } else if (par.data > 1) {
      m.gradient_buffers = static_cast<int64_t>(wire * st.parameters);
    }
    m.activations = static_cast<int64_t>(kFloat * saved * b * st.in_flight);
    if (last) m.logits = static_cast<int64_t>(kFloat * 2.0 * logits_per_sample * b);
    if (s == 0) {
      // CPU: the step's batch and the loader's prefetch queue; GPU: the
      // micro-batch on the device (the rest waits in pinned host memory).
      const double samples = on_gpu ? b : b * par.micro_batches * (kHostPrefetch + 1);
      m.batches = static_cast<int64_t>(kFloat * sample_in * samples);
    }
    m.transients = static_cast<int64_t>(kFloat * transient * b);
    plan.peak_bytes = std::max(plan.peak_bytes, m.total());
    largest_stage_grad_bytes = std::max(largest_stage_grad_bytes, static_cast<int64_t>(wire * st.parameters));

    const double stage_step_flops = 3.0 * st.forward_flops_per_sample * b * par.micro_batches;
    plan.flops_per_step += stage_step_flops * par.data;
    const double micro_seconds = 3.0 * st.forward_flops_per_sample * b / (plan.peak_flops * plan.mfu);
    slowest_micro_batch_seconds = std::max(slowest_micro_batch_seconds, micro_seconds);
    sum_micro_batch_seconds += micro_seconds;
    plan.stages.push_back(std::move(st));
  }
  // The loss: 5 FLOPs per logit, forward only (its backward is the same pass).
  plan.flops_per_step += 5.0 * logits_per_sample * config.data.global_batch;
  if (gpt) plan.flops_per_token = plan.flops_per_step / (config.data.global_batch * config.model.block_size);

  if (par.pipeline > 1) {
    plan.bubble_fraction = static_cast<double>(par.pipeline - 1) / (par.micro_batches + par.pipeline - 1);
    plan.compute_seconds = slowest_micro_batch_seconds * (par.micro_batches + par.pipeline - 1);
  } else {
    plan.compute_seconds = sum_micro_batch_seconds * par.micro_batches;
  }
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
  if (par.pipeline > 1)
    plan.notes.push_back("every pipeline rank holds the whole model's weights and gradients (rank 0 evaluates and "
                         "checkpoints it); the optimizer state is per stage");
  if (plan.total_steps == 0) plan.notes.push_back("time to the end unknown: the epoch length needs the dataset's size");
  if (on_gpu && plan.compute_seconds < 5e-3)
    plan.notes.push_back("a step this short is bound by kernel launches and memory traffic, not FLOPs: its time is "
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

namespace {

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

}  // namespace

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
  absl::StrAppend(&out, "\nmemory per rank\n");
  std::string header = absl::StrFormat("  %-24s", "");
  for (const StagePlan& s : p.stages) {
    absl::StrAppend(&header, absl::StrFormat(" %14s", p.stages.size() > 1 ? absl::StrCat("stage ", s.stage) : "rank"));
  }
  absl::StrAppend(&out, header, "\n");
  auto memory_row = [&](const std::string& name, int64_t MemoryBreakdown::*field) {
    std::string line = absl::StrFormat("  %-24s", name);
    for (const StagePlan& s : p.stages) absl::StrAppend(&line, absl::StrFormat(" %14s", Bytes(s.memory.*field)));
    absl::StrAppend(&out, line, "\n");
  };
  memory_row("weights (fp32)", &MemoryBreakdown::weights);
  memory_row("gradients (fp32)", &MemoryBreakdown::gradients);
  memory_row("optimizer state (fp32)", &MemoryBreakdown::optimizer_state);
  memory_row("gradient buffers", &MemoryBreakdown::gradient_buffers);
  memory_row("activations", &MemoryBreakdown::activations);
  memory_row("logits and their grad", &MemoryBreakdown::logits);
  memory_row("input batches", &MemoryBreakdown::batches);
  memory_row("backward transients", &MemoryBreakdown::transients);
  std::string total = absl::StrFormat("  %-24s", "total");
  for (const StagePlan& s : p.stages) absl::StrAppend(&total, absl::StrFormat(" %14s", Bytes(s.memory.total())));
  absl::StrAppend(&out, total, "\n");
  if (p.stages.size() > 1) {
    std::string blocks = absl::StrFormat("  %-24s", "blocks");
    for (const StagePlan& s : p.stages)
      absl::StrAppend(&blocks, absl::StrFormat(" %14s", absl::StrCat("[", s.begin_block, ", ", s.end_block, ")")));
    std::string flight = absl::StrFormat("  %-24s", "micro-batches in flight");
    for (const StagePlan& s : p.stages) absl::StrAppend(&flight, absl::StrFormat(" %14d", s.in_flight));
    absl::StrAppend(&out, blocks, "\n", flight, "\n");
  }
  absl::StrAppend(&out, "\ntime (at ", absl::StrFormat("%.0f%%", p.mfu * 100), " MFU)\n");
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
        "{\"weights\":%d,\"gradients\":%d,\"optimizer_state\":%d,\"gradient_buffers\":%d,\"activations\":%d,"
        "\"logits\":%d,\"batches\":%d,\"transients\":%d,\"model_states\":%d,\"total\":%d}",
        m.weights, m.gradients, m.optimizer_state, m.gradient_buffers, m.activations, m.logits, m.batches,
        m.transients, m.model_states(), m.total());
  };
  std::vector<std::string> stages;
  for (const StagePlan& s : p.stages) {
    stages.push_back(absl::StrFormat(
        "{\"stage\":%d,\"begin_block\":%d,\"end_block\":%d,\"parameters\":%d,\"in_flight\":%d,"
        "\"forward_flops_per_sample\":%.6g,\"memory_bytes\":%s}",
        s.stage, s.begin_block, s.end_block, s.parameters, s.in_flight, s.forward_flops_per_sample,
        memory(s.memory)));
  }
  std::vector<std::string> notes;
  for (const std::string& n : p.notes) notes.push_back(absl::StrCat("\"", n, "\""));
  return absl::StrFormat(
      "{\"device\":\"%s\",\"precision\":\"%s\",\"peak_flops\":%.6g,\"mfu\":%.6g,\"nodes\":%d,\"ranks\":%d,"
      "\"data\":%d,\"pipeline\":%d,\"micro_batches\":%d,\"schedule\":\"%s\",\"zero1\":%s,\"parameters\":%d,"
      "\"global_batch\":%d,\"micro_batch\":%d,\"tokens_per_sample\":%d,\"stages\":[%s],\"peak_bytes\":%d,"
      "\"usable_bytes\":%d,\"fits\":%s,\"headroom_bytes\":%d,\"flops_per_step\":%.6g,\"flops_per_token\":%.6g,"
      "\"compute_seconds\":%.6g,\"allreduce_seconds\":%.6g,\"allreduce_exposed_seconds\":%.6g,"
      "\"bubble_fraction\":%.6g,\"step_seconds\":%.6g,\"samples_per_second\":%.6g,\"tokens_per_second\":%.6g,"
      "\"total_steps\":%d,\"total_seconds\":%.6g,\"notes\":[%s]}",
      p.device.name, p.precision, p.peak_flops, p.mfu, p.nodes, p.ranks, p.data, p.pipeline, p.micro_batches,
      p.schedule, p.zero1 ? "true" : "false", p.parameters, p.global_batch, p.micro_batch, p.tokens_per_sample,
      absl::StrJoin(stages, ","), p.peak_bytes, p.usable_bytes, p.fits ? "true" : "false", p.headroom_bytes,
      p.flops_per_step, p.flops_per_token, p.compute_seconds, p.allreduce_seconds, p.allreduce_exposed_seconds,
      p.bubble_fraction, p.step_seconds, p.samples_per_second, p.tokens_per_second, p.total_steps, p.total_seconds,
      absl::StrJoin(notes, ","));
}

}  // namespace ringmaster::engine::plan
