#ifndef RINGMASTER_ENGINE_PLAN_PLAN_MEMORY_H_
#define RINGMASTER_ENGINE_PLAN_PLAN_MEMORY_H_

// Internal to //engine/plan: how the planned backend stores a model
// (Storage), and what each block of the model costs per sample (BlockCost),
// as the engine's layers allocate it (engine/nn: model_factory.cc, gpt.cc,
// transformer_layers.cc). Pure functions; thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/nn/model_factory.h"
#include "engine/plan/plan.h"
#include "engine/train/trainer_config.h"

namespace ringmaster::engine::plan::internal {

// engine/cuda/cudnn_sdpa.h: backward engine configurations needing more
// workspace are skipped, which rules out the deterministic "dP in workspace"
// graph (b * nh * t * t * 2 bytes) in favour of the fp32 dQ accumulator.
inline constexpr int64_t kCudnnMaxWorkspaceBytes = int64_t{2} << 30;

enum class AttentionPath {
  kCudnnFlash,  // bf16/fp16 on a GPU: cuDNN, tensor cores, saves the logsumexp [B, H, T] f32
  kOwnFlash,    // our flash kernels (fp32, CUDA cores), saves the same
  kUnfused,     // GEMMs around a softmax, saves the probabilities [B, H, T, T] f32 (the CPU always)
};
std::string AttentionPathName(AttentionPath path);

// How the planned backend stores (and, for the profile, computes) a model.
struct Storage {
  bool gpu = false;
  bool sixteen_bit = false;        // bf16/fp16 compute
  double act = 4;                  // bytes of an activation or activation-gradient element
  bool operand_copies = false;     // 16-bit copies of the GEMM/conv operand parameters
  bool per_gemm_conversions = false;  // the old design's 16-bit GPU path
  bool fused_classifier = false;   // the GPT's chunked classifier (padded vocabulary)
  AttentionPath attention = AttentionPath::kUnfused;
  int64_t classes = 0;             // the classifier's columns (GPT: padded vocabulary when fused)
};

// The storage of `config` on `device` under `options` (the CPU: fp32,
// unfused attention, the same classifier rule as a GPU).
Storage StorageFor(const TrainerConfig& config, const DeviceProfile& device, const PlanOptions& options);
// fp32 on the CPU with the fused classifier: for parameter counts and FLOPs.
Storage ReferenceStorage(const nn::ModelConfig& model);

// What one block costs, per sample unless noted.
struct BlockCost {
  int64_t parameters = 0;        // counted as PyTorch counts them
  int64_t padding = 0;           // stored parameter elements beyond them (padded vocabulary rows)
  int64_t operands = 0;          // stored elements of its GEMM/conv operand parameters (padding included)
  double forward_flops = 0;      // counted as stage_partition_cost.h counts (unpadded vocabulary)
  double saved = 0;              // bytes kept for the backward (its output included)
  double largest = 0;            // bytes of its largest activation
  double output = 0;             // bytes it hands to the next block
};

// Per block, as the model factory builds them: MLP/CNN blocks, or the GPT's
// embedding, n_layer transformer blocks, and final norm + head.
std::vector<BlockCost> Blocks(const nn::ModelConfig& model, const Storage& storage);

// Non-trainable state (BatchNorm running mean, variance and batch count), elements.
int64_t BufferElements(const nn::ModelConfig& model);

// Bytes of the backward's scratch beside its activations for a micro-batch
// of `b` samples: cuDNN attention's backward workspace (GPT layers), else 0.
double BackwardScratchBytes(const nn::ModelConfig& model, const Storage& storage, int64_t b);

// The classifier's line of the memory breakdown for a micro-batch of `b`
// samples with `in_flight` micro-batches held: the GPT's chunk buffer plus
// its input gradients, or the logits and their gradient.
double ClassifierBytes(const nn::ModelConfig& model, const Storage& storage, int64_t b, int in_flight);
// Rows per chunk of the GPT's fused classifier for `b` samples (0 otherwise).
int64_t ClassifierChunkRowsFor(const nn::ModelConfig& model, const Storage& storage, int64_t b);

}  // namespace ringmaster::engine::plan::internal

#endif  // RINGMASTER_ENGINE_PLAN_PLAN_MEMORY_H_
