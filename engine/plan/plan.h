#ifndef RINGMASTER_ENGINE_PLAN_PLAN_H_
#define RINGMASTER_ENGINE_PLAN_PLAN_H_

// The plan of a job spec on a device type, before anything is launched: the
// memory each rank needs, the FLOPs and time of a step and of the whole run,
// and whether it fits (`ringmaster plan`, `validate`, `submit --strict`).
//
// Memory is what the engine allocates, tensor by tensor, not a generic rule
// (plan_memory.h has the per-block accounting):
//  * model states: fp32 weights and fp32 gradients whatever precision.compute
//    says, and the optimizer's fp32 state (AdamW: 4 + 4 + 8 = 16 B/param).
//    With bf16/fp16 on a GPU every GEMM or convolution operand parameter
//    (Linear weights and biases, conv weights, the GPT's vocabulary tables)
//    also has a 16-bit copy, made once per optimizer step (+2 B each). ZeRO-1
//    divides the optimizer state by the data-parallel size. A pipeline stage
//    holds the optimizer state of its own blocks only, but (today) every
//    block's weights, copies and gradients: each rank builds the whole model,
//    and rank 0 evaluates and checkpoints it. The GPT's vocabulary is padded
//    to a multiple of 128 (engine/core/classifier_geometry.h): the padding
//    rows are stored (weights, gradients, state, copies, buckets) but not
//    counted in `parameters`, which is PyTorch's count.
//  * gradient buffers: the data-parallel buckets (one flat copy of the
//    stage's gradients, at the wire precision), or ZeRO-1's flat gradients
//    and shard.
//  * activations: what each block keeps for its backward, in the activation
//    dtype (2 bytes for bf16/fp16 on a GPU, else 4: the CPU stores fp32),
//    with statistics (norm means and rstds, the saved attention), dropout
//    masks and the loss in fp32; times the micro-batches in flight: 1
//    without a pipeline, min(P - stage, m) for 1F1B, m for GPipe. The saved
//    attention: the logsumexp [B, H, T] with cuDNN's flash attention (bf16 /
//    fp16, a head size that is a multiple of 8 up to the device's limit:
//    256 on Hopper, 128 on the A100) or our flash kernels (head size <= 64),
//    else the probabilities [B, H, T, T] (and always on the CPU).
//  * the classifier on the last stage: the GPT's fused, chunked classifier
//    holds one chunk of logits (ClassifierChunkRows x padded vocabulary, its
//    gradient in place) and the gradient of its input [B T, C] from the
//    forward to the backward; other models keep the logits and their
//    gradient. Then the input batches (on the CPU the loader's prefetch
//    queue too), and the backward's transient buffers: twice a block's
//    largest activation plus its scratch (cuDNN attention's backward
//    workspace), less the caches of the blocks after it, which the backward
//    has freed by then, and less the fused classifier's chunk buffer and
//    dh, freed before the layers' backward (so the total is the larger of
//    the classifier's forward and the backward, not their sum).
//
// FLOPs follow the counting rules of the pipeline partitioner
// (engine/parallel/stage_partition_cost.h); a training step is 3x the
// forward (GPT: 6N + 12 L C T per token). Time on a GPU: a profile by op
// class (plan_time.h): GEMMs at the device's large-GEMM rate, slowed by each
// GEMM's operand traffic; attention at the rate of the kernel that runs it;
// memory-bound ops at the measured HBM bandwidth; the optimizer step. On the
// CPU, or with an explicit --mfu: compute at that MFU of the dense peak.
// Then the ring all-reduce, 2 (n-1)/n x gradient bytes / bandwidth,
// overlapped with the backward by the buckets except for the last bucket;
// the pipeline bubble (p-1)/(m+p-1).
//
// Thread-safe: pure functions over their arguments.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/train/trainer_config.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::engine::plan {

// One device type: dense peak rates (FLOP/s, per device), measured rates,
// memory and links.
struct DeviceProfile {
  std::string name;         // "h100"
  std::string description;  // "NVIDIA H100 SXM5 80 GB"
  double peak_bf16 = 0, peak_fp16 = 0, peak_tf32 = 0, peak_fp32 = 0;
  // FLOP/s of one large (8192^3) bf16 GEMM as measured (h100), or the dense
  // peak times the H100's measured fraction where nothing was measured. fp16
  // runs at the same rate; tf32 and fp32 GEMMs at their peaks times the same
  // fraction. 0: no per-op-class profile (the CPU).
  double large_gemm_bf16 = 0;
  // HBM bytes per second, reads plus writes, of a device-to-device copy as
  // measured (h100) or the peak times the H100's measured fraction.
  double memory_bytes_per_second = 0;
  // cuDNN's fused flash attention (bf16/fp16) runs at this fraction of
  // large_gemm_bf16; our fp32 flash kernels at this fraction of peak_fp32.
  double cudnn_attention_fraction = 0;
  double fp32_flash_efficiency = 0;
  // The largest head size cuDNN's fused attention trains (forward and
  // backward) on this architecture, as engine/cuda/cudnn_sdpa.cc's
  // MaxHeadSize has it: Hopper 256, Ampere 128 (its backward). 0: none.
  int64_t cudnn_attention_max_head_size = 0;
  std::string rates_source;  // where large_gemm_bf16 and the bandwidth come from
  int64_t memory_bytes = 0;
  // Held by the CUDA context, cuBLAS/cuDNN workspaces and NCCL buffers: not
  // available to tensors.
  int64_t reserved_bytes = 0;
  double nvlink_bytes_per_second = 0;      // per device, one direction (within a node)
  double network_bytes_per_second = 0;     // per device, one direction (InfiniBand between nodes)
  bool flash_attention = false;            // flash kernels (save [B, H, T]) for the head sizes they take
};

// "h100", "h200", "a100", "cpu". The CPU profile is this machine: its cores
// at 32 fp32 FLOP/cycle (AVX2 FMA) and 2.5 GHz, its physical memory, and
// loopback Gloo at 5 GB/s. INVALID_ARGUMENT naming `--gpu` for another name.
absl::StatusOr<DeviceProfile> FindDevice(absl::string_view name);
std::vector<std::string> DeviceNames();

// The MFU assumed on the CPU (and on a GPU without rates) unless --mfu says.
inline constexpr double kDefaultMfu = 0.4;

struct PlanOptions {
  // Assumed model FLOPs utilisation, in (0, 1]: the step's compute is the
  // FLOPs at this fraction of the dense peak, on every device (the GPU
  // profile is still reported). 0: kDefaultMfu on the CPU, the per-op-class
  // profile on a GPU.
  double mfu = 0;
  // The design planned. The defaults are the engine's (issue #25); the old
  // settings exist for the before/after comparison (tests and
  // bench/GPU_NOTES.md) only.
  //  sixteen_bit_storage = false: bf16/fp16 on a GPU stores fp32 activations,
  //    converts both operands of every GEMM to 16 bits and rounds every GEMM
  //    output in an extra pass, has no weight copies, and runs attention in
  //    our fp32 flash kernels (on CUDA cores).
  //  fused_classifier = false: the GPT's logits and their gradient are held
  //    whole (unpadded vocabulary).
  bool sixteen_bit_storage = true;
  bool fused_classifier = true;
};

// Bytes per rank, by kind.
struct MemoryBreakdown {
  int64_t weights = 0;          // fp32 masters (and buffers)
  int64_t weight_copies = 0;    // 16-bit copies of the GEMM/conv operand parameters
  int64_t gradients = 0;
  int64_t optimizer_state = 0;
  int64_t gradient_buffers = 0;  // DP buckets or ZeRO-1 flats
  int64_t activations = 0;       // saved for the backward, all micro-batches in flight
  int64_t logits = 0;            // the classifier (last stage): see above
  int64_t batches = 0;           // input batches
  int64_t transients = 0;        // the backward's working buffers
  int64_t model_states() const { return weights + weight_copies + gradients + optimizer_state; }
  int64_t total() const {
    return model_states() + gradient_buffers + activations + logits + batches + transients;
  }
};

// The op classes of the GPU time profile (plan_time.h says what each counts).
enum class OpClass {
  kGemm,            // Linear layers and the classifier, forward and backward (convolutions too)
  kAttention,       // QK^T, softmax, PV and their backward
  kNormalization,   // LayerNorm, BatchNorm
  kElementwise,     // GELU, ReLU, dropout, pooling, residual adds, bias gradients
  kLoss,            // softmax cross-entropy
  kEmbedding,       // token + position lookup and its gradient
  kOptimizer,       // the update, gradient norm, zeroing
  kWeightCopies,    // the per-step 16-bit operand copies
  kConversions,     // old design: per-GEMM operand conversions and output rounding passes
};
inline constexpr int kNumOpClasses = 9;
absl::string_view OpClassName(OpClass c);  // "GEMMs", "attention", ...
absl::string_view OpClassKey(OpClass c);   // "gemm", "attention", ... (JSON)

// One op of a stage's step (summed over layers and micro-batches): compute
// classes count FLOPs, memory-bound ones bytes read and written.
struct OpCost {
  std::string name;  // "c_fc forward GEMM", "ln_2 backward", ...
  OpClass op_class = OpClass::kGemm;
  double flops = 0, bytes = 0, seconds = 0;
};

struct OpClassTotal {
  double flops = 0, bytes = 0, seconds = 0;
};

struct StagePlan {
  int stage = 0;
  int begin_block = 0, end_block = 0;  // blocks [begin, end)
  int64_t parameters = 0;              // trained by this stage
  int in_flight = 1;                   // micro-batches whose activations are held at once
  double forward_flops_per_sample = 0;
  MemoryBreakdown memory;
  // GPU profile of one step of this stage (every micro-batch and the
  // optimizer step); empty on the CPU.
  std::vector<OpCost> ops;
  std::array<OpClassTotal, kNumOpClasses> by_class{};  // sums of `ops`
  double micro_batch_seconds = 0;  // forward + backward of one micro-batch
  double optimizer_seconds = 0;    // the optimizer step and the weight copies
};

struct Plan {
  DeviceProfile device;
  std::string precision;  // "fp32", "tf32", "bf16", "fp16"
  double peak_flops = 0;  // per rank: the device's dense peak for that precision (CPU: its share of the cores)
  // "op classes" (the GPU profile) or "mfu"; mfu: the assumed one, or the
  // one the profile implies (FLOPs per step / ranks / compute / peak).
  std::string time_model;
  double mfu = 0;
  int nodes = 1, ranks = 1, data = 1, pipeline = 1, micro_batches = 1;
  std::string schedule;  // "1f1b", "gpipe" ("" without a pipeline)
  bool zero1 = false;
  int64_t parameters = 0;           // the whole model (tied weights once, vocabulary padding not)
  int64_t global_batch = 0;         // samples per step
  int64_t micro_batch = 0;          // samples per rank and micro-batch
  int64_t tokens_per_sample = 0;    // language models; 0 for images
  // The design (PlanOptions) as it applies here.
  int activation_bytes = 4;
  bool weight_copies = false;
  bool fused_classifier = false;    // a GPT with the chunked classifier
  int64_t padded_vocab = 0;         // GPT: the classifier's columns
  int64_t classifier_chunk_rows = 0;
  std::string attention;            // "cudnn flash", "flash (fp32 kernels)", "unfused"; "" without attention
  // The profile's rates (GPU): the large-GEMM rate for the precision, the
  // attention kernel's, the HBM bandwidth.
  double matmul_rate = 0, attention_rate = 0, memory_bandwidth = 0;
  double gemm_math_rate = 0;  // what reproduces matmul_rate at 8192^3 with its operand traffic (plan_time.h)
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
// (0: not given) or a layout that does not match the ranks.
absl::StatusOr<Plan> MakePlan(const TrainerConfig& config, int nodes, int ranks_per_node,
                              const DeviceProfile& device, const PlanOptions& options,
                              int64_t steps_per_epoch = 0);

// The plan of a (defaulted, validated) spec: its trainer config, its
// resources, and the dataset's epoch length where the data can be sized
// without reading it (Fashion-MNIST, synthetic, a text file's size).
absl::StatusOr<Plan> PlanJobSpec(const v1::JobSpec& spec, const DeviceProfile& device, const PlanOptions& options);

// Training-memory formulas, exposed for tests: the engine's parameter count
// of a model config (PyTorch's: no vocabulary padding), and the forward FLOPs
// of each of its blocks per sample.
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
