#ifndef RINGMASTER_ENGINE_PLAN_PLAN_H_
#define RINGMASTER_ENGINE_PLAN_PLAN_H_

// The plan of a job spec on a device type, before anything is launched: the
// memory each rank needs, the FLOPs and time of a step and of the whole run,
// and whether it fits (`ringmaster plan`, `validate`, `submit --strict`).
//
// Memory is what the engine allocates, tensor by tensor, not a generic rule:
//  * model states: the engine keeps fp32 weights and fp32 gradients whatever
//    precision.compute says (bf16/fp16 convert GEMM operands on the fly), so
//    mixed-precision AdamW costs 4 + 4 + 8 = 16 B/param, as fp32 masters with
//    16-bit weights and gradients would. ZeRO-1 divides the optimizer state by
//    the data-parallel size. A pipeline stage holds the optimizer state of its
//    own blocks only, but (today) every block's weights and gradients: each
//    rank builds the whole model, and rank 0 evaluates and checkpoints it.
//  * gradient buffers: the data-parallel buckets (one flat copy of the
//    stage's gradients, at the wire precision), or ZeRO-1's flat gradients
//    and shard.
//  * activations: what each block keeps for its backward (the saved
//    attention as the backend keeps it: [B, H, T, T] on the CPU, [B, H, T]
//    with the flash kernel on a GPU), times the micro-batches in flight: 1
//    without a pipeline, min(P - stage, m) for 1F1B, m for GPipe.
//  * the logits and their gradient on the last stage, the input batches
//    (on the CPU the loader's prefetch queue too), and the backward's
//    transient buffers: twice a block's largest activation, less the caches
//    of the blocks after it, which the backward has freed by then.
//
// FLOPs follow the counting rules of the pipeline partitioner
// (engine/parallel/stage_partition_cost.h); a training step is 3x the
// forward (GPT: 6N + 12 L C T per token). Time: compute at an assumed MFU of
// the device's dense peak for the compute precision; the ring all-reduce,
// 2 (n-1)/n x gradient bytes / bandwidth, overlapped with the backward by the
// buckets except for the last bucket; the pipeline bubble (p-1)/(m+p-1).
//
// Thread-safe: pure functions over their arguments.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/train/trainer_config.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::engine::plan {

// One device type: dense peak rates (FLOP/s, per device), memory and links.
struct DeviceProfile {
  std::string name;         // "h100"
  std::string description;  // "NVIDIA H100 SXM5 80 GB"
  double peak_bf16 = 0, peak_fp16 = 0, peak_tf32 = 0, peak_fp32 = 0;
  int64_t memory_bytes = 0;
  // Held by the CUDA context, cuBLAS/cuDNN workspaces and NCCL buffers: not
  // available to tensors.
  int64_t reserved_bytes = 0;
  double nvlink_bytes_per_second = 0;      // per device, one direction (within a node)
  double network_bytes_per_second = 0;     // per device, one direction (InfiniBand between nodes)
  bool flash_attention = false;            // saves [B, H, T] (log-sum-exp) instead of the scores
};

// "h100", "h200", "a100", "cpu". The CPU profile is this machine: its cores
// at 32 fp32 FLOP/cycle (AVX2 FMA) and 2.5 GHz, its physical memory, and
// loopback Gloo at 5 GB/s. INVALID_ARGUMENT naming `--gpu` for another name.
absl::StatusOr<DeviceProfile> FindDevice(absl::string_view name);
std::vector<std::string> DeviceNames();

struct PlanOptions {
  double mfu = 0.4;  // assumed model FLOPs utilisation, in (0, 1]
};

// Bytes per rank, by kind.
struct MemoryBreakdown {
  int64_t weights = 0;
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t gradient_buffers = 0;  // DP buckets or ZeRO-1 flats
  int64_t activations = 0;       // saved for the backward, all micro-batches in flight
  int64_t logits = 0;            // logits and their gradient (last stage)
  int64_t batches = 0;           // input batches
  int64_t transients = 0;        // the backward's working buffers
  int64_t model_states() const { return weights + gradients + optimizer_state; }
  int64_t total() const {
    return weights + gradients + optimizer_state + gradient_buffers + activations + logits + batches + transients;
  }
};

struct StagePlan {
  int stage = 0;
  int begin_block = 0, end_block = 0;  // blocks [begin, end)
  int64_t parameters = 0;              // trained by this stage
  int in_flight = 1;                   // micro-batches whose activations are held at once
  double forward_flops_per_sample = 0;
  MemoryBreakdown memory;
};

struct Plan {
  DeviceProfile device;
  std::string precision;  // "fp32", "tf32", "bf16", "fp16"
  double peak_flops = 0;  // per rank: the device's dense peak for that precision (CPU: its share of the cores)
  double mfu = 0;
  int nodes = 1, ranks = 1, data = 1, pipeline = 1, micro_batches = 1;
  std::string schedule;  // "1f1b", "gpipe" ("" without a pipeline)
  bool zero1 = false;
  int64_t parameters = 0;           // the whole model (tied weights once)
  int64_t global_batch = 0;         // samples per step
  int64_t micro_batch = 0;          // samples per rank and micro-batch
  int64_t tokens_per_sample = 0;    // language models; 0 for images
  std::vector<StagePlan> stages;
  int64_t peak_bytes = 0;           // the largest stage's total
  int64_t usable_bytes = 0;         // device memory less the reserve
  bool fits = false;
  int64_t headroom_bytes = 0;       // usable - peak (negative: short by)
  double flops_per_step = 0;        // all ranks, forward + backward
  double flops_per_token = 0;       // language models
  double compute_seconds = 0;       // per step, the slowest stage, bubble included
  double allreduce_seconds = 0;     // the gradient all-reduce, all of it
  double allreduce_exposed_seconds = 0;  // the part the backward does not hide
  double bubble_fraction = 0;
  double step_seconds = 0;
  double samples_per_second = 0, tokens_per_second = 0;
  int64_t total_steps = 0;  // 0: unknown (an epoch length needs the dataset)
  double total_seconds = 0;
  std::vector<std::string> notes;  // assumptions worth reading
};

// The plan of `config` on `nodes` x `ranks_per_node` ranks of `device`;
// steps_per_epoch: the dataset's batches per epoch (0: unknown; needed only
// when the config counts epochs). INVALID_ARGUMENT for an mfu outside (0, 1]
// or a layout that does not match the ranks.
absl::StatusOr<Plan> MakePlan(const TrainerConfig& config, int nodes, int ranks_per_node,
                              const DeviceProfile& device, const PlanOptions& options,
                              int64_t steps_per_epoch = 0);

// The plan of a (defaulted, validated) spec: its trainer config, its
// resources, and the dataset's epoch length where the data can be sized
// without reading it (Fashion-MNIST, synthetic, a text file's size).
absl::StatusOr<Plan> PlanJobSpec(const v1::JobSpec& spec, const DeviceProfile& device, const PlanOptions& options);

// Training-memory formulas, exposed for tests: the engine's parameter count
// of a model config, and the bytes each of its blocks keeps for its backward
// per sample (flash: the saved attention as the flash kernel keeps it).
int64_t ModelParameters(const nn::ModelConfig& model);
std::vector<double> BlockForwardFlopsPerSample(const nn::ModelConfig& model);

// FLOPs of training one sample through blocks [begin, end) of `model`:
// 3x the forward, plus the loss when `end` is the last block. The trainer
// reports its rank's model FLOPs (and MFU) with it.
double TrainingFlopsPerSample(const nn::ModelConfig& model, int begin, int end);

// The profile of a CUDA device by the name the driver gives it ("NVIDIA H100
// 80GB HBM3" -> h100); NOT_FOUND for a device not in the table.
absl::StatusOr<DeviceProfile> DeviceForCudaName(absl::string_view name);

// The device's dense peak for the config's compute precision (tf32 where the
// config turns it on for fp32 on CUDA).
double PeakFlops(const DeviceProfile& device, const TrainerConfig& config);

// The plan as a table (text) or one JSON object.
std::string PlanTable(const Plan& plan);
std::string PlanJson(const Plan& plan);

}  // namespace ringmaster::engine::plan

#endif  // RINGMASTER_ENGINE_PLAN_PLAN_H_
