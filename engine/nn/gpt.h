#ifndef RINGMASTER_ENGINE_NN_GPT_H_
#define RINGMASTER_ENGINE_NN_GPT_H_

// GPT-2-style decoder as a sequence of blocks:
//   block 0:           Embedding (token + position)           tokens i32 [B, T] -> [B, T, C]
//   blocks 1..n_layer: TransformerBlock "transformer.h.{i}"   [B, T, C] -> [B, T, C]
//   last block:        LmHead (ln_f + projection to vocab)     [B, T, C] -> logits [B, T, V]
// With tie_embeddings the head multiplies by transformer.wte.weight (GPT-2);
// the shared Parameter is listed once. A pipeline that puts the embedding and
// the head on different ranks must sum that parameter's gradient between
// them (as Megatron does); see docs/models.md.
//
// The vocabulary tables are padded to PaddedVocab(V) rows
// (engine/core/classifier_geometry.h: 50,257 -> 50,304), rows no token uses
// and that stay zero; checkpoints and NumParameters see V rows. Training and
// evaluation go through LmHead::ForwardLoss, the classifier fused with the
// softmax cross-entropy chunk by chunk, so the logits never exist whole.

#include <memory>
#include <string>

#include "engine/nn/model.h"
#include "engine/nn/model_factory.h"
#include "engine/nn/transformer_layers.h"

namespace ringmaster::engine::nn {

// Pre-LN block: x + attn(ln_1(x)), then h + mlp(ln_2(h)), mlp = c_proj(gelu(c_fc(h))).
// The residual add before ln_2 and c_fc's GELU run as fused backend ops
// (AddLayerNormForward, LinearGeluForward), and so do both residual adds of
// the backward pass (AddLayerNormBackward): bitwise the unfused ops on the CPU.
class TransformerBlock final : public Block {
 public:
  TransformerBlock(Backend& backend, std::string prefix, const ModelConfig& config);
  std::string_view kind() const override { return "TransformerBlock"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override;

 private:
  Backend& backend_;
  std::string prefix_;
  int64_t channels_;
  LayerNorm ln_1_;
  CausalSelfAttention attn_;
  LayerNorm ln_2_;
  Linear c_fc_;  // with the GELU (ForwardGelu)
  Linear c_proj_;
};

// Final LayerNorm "transformer.ln_f" and the vocabulary projection (no bias):
// logits = ln_f(x) @ W^T, W = transformer.wte.weight (tied) or lm_head.weight,
// [PaddedVocab(V), C] (see above).
//
// ForwardLoss: for each chunk of ClassifierChunkRows rows, the logits of the
// chunk [rows, padded V] go into one buffer (activation dtype), which the
// softmax cross-entropy turns into their gradient in place (padded columns
// excluded); in training that buffer then gives the chunk's input gradient
// (dlogits @ W) and adds dlogits^T h to W's gradient before the next chunk.
// In fp32 the loss equals the unfused Forward + SoftmaxCrossEntropy within
// rounding of the sums' order.
class LmHead final : public LossHead {
 public:
  // tied_weight: the embedding's table, or null for an own "lm_head.weight".
  LmHead(Backend& backend, const ModelConfig& config, Parameter* tied_weight);
  std::string_view kind() const override { return "LmHead"; }
  using Block::Backward;
  using Block::Forward;
  // Plain: logits [B, T, V] (the real vocabulary), kept whole.
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  // After Forward: dy = dlogits [B, T, V]. After ForwardLoss: dy is ignored.
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override;
  int64_t num_classes() const override { return vocab_; }
  absl::StatusOr<Tensor> ForwardLoss(const Tensor& x, const Tensor& targets, int32_t ignore_index, float grad_scale,
                                     bool training, int micro_batch) override;
  // The logits buffer's budget in bytes (kClassifierChunkBytes; tests make
  // it small to run many chunks).
  void set_chunk_bytes(int64_t bytes) { chunk_bytes_ = bytes; }

 private:
  Backend& backend_;
  int64_t channels_, vocab_;
  LayerNorm ln_f_;
  Parameter own_weight_;
  Parameter* weight_;
  CacheSlots<Tensor> inputs_;    // Forward: ln_f's output
  CacheSlots<Tensor> input_grads_;  // ForwardLoss: the gradient of ln_f's output
  int64_t chunk_bytes_;
};

absl::StatusOr<std::unique_ptr<Model>> BuildGpt(const ModelConfig& config, Backend& backend);

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_GPT_H_
