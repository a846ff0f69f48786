#ifndef RINGMASTER_ENGINE_NN_MODEL_FACTORY_H_
#define RINGMASTER_ENGINE_NN_MODEL_FACTORY_H_

// ModelConfig -> Model. The architectures and their PyTorch twins (same
// state_dict names and layouts) are documented in docs/models.md.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/nn/model.h"

namespace ringmaster::engine::nn {

enum class ModelKind { kMlp, kCnn, kGpt };

struct ModelConfig {
  ModelKind kind = ModelKind::kMlp;
  uint64_t seed = 0;  // initialisation (and dropout) seed; same seed -> same weights

  // Image classifiers (MLP, CNN): input [N, channels, height, width].
  int64_t input_channels = 1;
  int64_t input_height = 28;
  int64_t input_width = 28;
  int64_t num_classes = 10;
  float dropout = 0.0f;  // MLP: after each hidden ReLU when > 0; CNN: before the last Linear (always present)

  // MLP hidden layer sizes.
  std::vector<int64_t> hidden_sizes = {256, 128};

  // CNN: per conv stage i, conv(k x k, padding k/2, -> conv_channels[i]) + BN +
  // ReLU + max-pool 2x2; then Flatten; per hidden size h, Linear(-> h) + ReLU +
  // Dropout; then Linear(-> classes). Each pool halves the height and width
  // (rounding down), which must stay >= 1.
  std::vector<int64_t> conv_channels = {32, 64};
  std::vector<int64_t> cnn_hidden_sizes = {128};
  int64_t kernel_size = 3;  // odd
  float bn_momentum = 0.1f;
  float bn_eps = 1e-5f;
  // BatchNorm ghost batch: samples per normalisation chunk in training (see
  // BatchNorm2d); 0: the whole (micro-)batch; >= 0. A D-rank run with m
  // micro-batches of a global batch B normalises groups of B / (D m) samples
  // (each rank its own micro-batch); setting it to B / (D m) makes a single
  // process, or any other layout, normalise the same groups. The trainer sets
  // it to the per-rank micro-batch size (a no-op on the ranks themselves).
  int64_t bn_ghost_batch = 0;

  // GPT-2-style decoder.
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 128;  // maximum sequence length
  int64_t vocab_size = 256;  // byte-level by default
  bool tie_embeddings = true;  // LM head shares transformer.wte.weight, as GPT-2
  float ln_eps = 1e-5f;
};

// InvalidArgument for inconsistent configurations (e.g. n_embd % n_head != 0).
absl::StatusOr<std::unique_ptr<Model>> BuildModel(const ModelConfig& config, Backend& backend);

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_MODEL_FACTORY_H_
