#ifndef RINGMASTER_ENGINE_NN_TRANSFORMER_LAYERS_H_
#define RINGMASTER_ENGINE_NN_TRANSFORMER_LAYERS_H_

// The layers of a GPT-2-style decoder, named as nanoGPT's model.py (which
// mirrors Hugging Face's GPT-2 names with nn.Linear [out, in] weights):
//   LayerNorm:           "<prefix>.weight", "<prefix>.bias" [C]
//   Embedding:           "transformer.wte.weight" [V, C] (held as [PaddedVocab(V), C]: MakeVocabularyTable),
//                        "transformer.wpe.weight" [block_size, C]
//   CausalSelfAttention: "<prefix>.c_attn.{weight,bias}" [3C, C], [3C];
//                        "<prefix>.c_proj.{weight,bias}" [C, C], [C]

#include <memory>
#include <string>

#include "engine/nn/layer.h"
#include "engine/nn/linear.h"

namespace ringmaster::engine::nn {

// torch.nn.LayerNorm(C, eps) over the last dimension.
class LayerNorm final : public Block {
 public:
  LayerNorm(Backend& backend, std::string prefix, int64_t channels, float eps = 1e-5f);
  std::string_view kind() const override { return "LayerNorm"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override { return {&weight_, &bias_}; }
  // The residual add fused in (Backend::AddLayerNormForward): *sum = a + b,
  // returns LayerNorm(*sum).
  absl::StatusOr<Tensor> AddForward(const Tensor& a, const Tensor& b, bool training, int micro_batch, Tensor* sum);
  // dx = residual + Backward(dy) in one op (Backend::AddLayerNormBackward); dx
  // may be residual itself (updated in place).
  absl::Status BackwardAdd(const Tensor& dy, int micro_batch, const Tensor& residual, const Tensor& dx);

 private:
  struct Cache {
    Tensor x, mean, rstd;
  };
  absl::StatusOr<Cache> TakeCache(const Tensor& dy, int micro_batch);
  Backend& backend_;
  std::string prefix_;
  int64_t channels_;
  float eps_;
  Parameter weight_, bias_;
  CacheSlots<Cache> caches_;
};

// Token + position embedding: tokens i32 [B, T] (T <= block_size) -> [B, T, C].
// Backward returns an undefined tensor (tokens have no gradient).
class Embedding final : public Block {
 public:
  // Both tables N(0, 0.02^2) from `seed`.
  Embedding(Backend& backend, int64_t vocab_size, int64_t block_size, int64_t channels, uint64_t seed);
  std::string_view kind() const override { return "Embedding"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& tokens, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override { return {&wte_, &wpe_}; }
  Parameter& wte() { return wte_; }

 private:
  Backend& backend_;
  int64_t vocab_, block_size_, channels_;
  Parameter wte_, wpe_;
  CacheSlots<Tensor> tokens_;
};

// Causal multi-head self-attention: c_proj(attention(c_attn(x))), x [B, T, C].
class CausalSelfAttention final : public Block {
 public:
  // GPT-2 initialisation: weights N(0, 0.02^2), c_proj's N(0, (0.02 / sqrt(2 n_layer))^2), biases 0.
  CausalSelfAttention(Backend& backend, std::string prefix, int64_t channels, int64_t n_head, int64_t n_layer,
                      uint64_t seed);
  std::string_view kind() const override { return "CausalSelfAttention"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override;

 private:
  struct Cache {
    Tensor qkv, saved, out;  // out: attention's output (c_proj's input), which the flash backward reads
  };
  Backend& backend_;
  std::string prefix_;
  int64_t channels_, n_head_;
  Linear c_attn_, c_proj_;
  CacheSlots<Cache> caches_;
};

// A vocabulary table "name" [PaddedVocab(vocab), channels] (a GEMM operand of
// the classifier): rows [0, vocab) N(0, 0.02^2) from `seed` (the values an
// unpadded table would get), padding rows zero, real_rows = vocab when padded.
Parameter MakeVocabularyTable(Backend& backend, std::string name, int64_t vocab, int64_t channels, uint64_t seed);

// Re-initialises a Linear the GPT-2 way: weight N(0, std^2), bias 0.
void InitGpt2Linear(Backend& backend, Linear& linear, double std, uint64_t seed);

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_TRANSFORMER_LAYERS_H_
