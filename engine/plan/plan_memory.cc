#include "engine/plan/plan_memory.h"

#include <algorithm>

#include "engine/core/classifier_geometry.h"
#include "engine/kernels/flash_limits.h"

namespace ringmaster::engine::plan::internal {
namespace {

constexpr double kF32 = 4.0;  // statistics, masks, the saved attention

// Per conv stage or hidden layer, as model_factory.cc builds them.
std::vector<BlockCost> ImageBlocks(const nn::ModelConfig& m, const Storage& s) {
  std::vector<BlockCost> blocks;
  const double a = s.act;
  const bool drop = m.dropout > 0.0f;  // a mask (f32) and an output per element; p = 0 keeps nothing
  const double input = static_cast<double>(m.input_channels * m.input_height * m.input_width);
  double features = input;
  if (m.kind == nn::ModelKind::kCnn) {
    int64_t c = m.input_channels, h = m.input_height, w = m.input_width;
    for (int64_t out : m.conv_channels) {
      const double hw = static_cast<double>(h * w), k2 = static_cast<double>(m.kernel_size * m.kernel_size);
      const double pooled = static_cast<double>(out * (h / 2) * (w / 2));
      BlockCost b;
      b.parameters = c * out * m.kernel_size * m.kernel_size + 2 * out;  // conv (no bias), BN gamma and beta
      b.operands = c * out * m.kernel_size * m.kernel_size;
      // conv, batch norm (5 per element), ReLU, max-pool (one per input element).
      b.forward_flops = 2.0 * out * hw * c * k2 + (5.0 + 1.0 + 1.0) * out * hw;
      b.saved = a * (2.0 * out * hw + pooled);  // conv output (batch norm's input), ReLU output, pooled output
      b.largest = a * out * hw;
      b.output = a * pooled;
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
    b.parameters = b.operands = static_cast<int64_t>(features) * size + size;
    b.forward_flops = 2.0 * features * h + h + h;  // GEMM, bias, ReLU (dropout is off in the eval forward)
    b.saved = a * h + (drop ? (kF32 + a) * h : 0.0);  // ReLU output (+ dropout mask and output)
    b.largest = a * h;
    b.output = a * h;
    blocks.push_back(b);
    features = h;
  }
  BlockCost out;
  out.parameters = out.operands = static_cast<int64_t>(features) * m.num_classes + m.num_classes;
  out.forward_flops = 2.0 * features * m.num_classes + m.num_classes;
  out.largest = a * m.num_classes;
  out.output = a * m.num_classes;  // the logits: counted apart
  blocks.push_back(out);
  // With 16-bit activations the first layer keeps a converted copy of the
  // (f32) input batch for its backward.
  if (a != kF32) blocks.front().saved += a * input;
  return blocks;
}

// Embedding, n_layer transformer blocks, final norm + head (gpt.cc).
std::vector<BlockCost> GptBlocks(const nn::ModelConfig& m, const Storage& s) {
  const double c = static_cast<double>(m.n_embd), t = static_cast<double>(m.block_size);
  const double heads = static_cast<double>(m.n_head), v = static_cast<double>(m.vocab_size);
  const double a = s.act;
  const int64_t table = (s.fused_classifier ? PaddedVocab(m.vocab_size) : m.vocab_size) * m.n_embd;
  const int64_t padding = table - m.vocab_size * m.n_embd;
  std::vector<BlockCost> blocks;
  BlockCost embedding;
  embedding.parameters = m.vocab_size * m.n_embd + m.block_size * m.n_embd;
  embedding.padding = padding;
  embedding.operands = table;  // wte is a GEMM operand (the tied head's; a copy is made even untied)
  embedding.forward_flops = t * c;
  embedding.saved = embedding.largest = embedding.output = a * t * c;
  blocks.push_back(embedding);
  BlockCost layer;
  layer.parameters = 12 * m.n_embd * m.n_embd + 13 * m.n_embd;
  layer.operands = 12 * m.n_embd * m.n_embd + 9 * m.n_embd;  // the four Linears' weights and biases
  // Per token: ln_1 5C; c_attn 6C^2 + 3C; attention 4TC + 5HT; c_proj 2C^2 + C;
  // residual + ln_2 6C; c_fc + GELU 8C^2 + 8C; c_proj 8C^2 + C; residual C.
  layer.forward_flops = t * (24.0 * c * c + 25.0 * c + 4.0 * t * c + 5.0 * heads * t);
  // ln_1 out, qkv, attention out, residual sum, ln_2 out, GELU input and
  // output (4C each), block output: 16C activations; two means and rstds and
  // the saved attention in f32.
  const double attention = kF32 * (s.attention == AttentionPath::kUnfused ? heads * t : heads);
  layer.saved = t * (16.0 * c * a + 4.0 * kF32 + attention);
  layer.largest = t * std::max(4.0 * c * a, attention);
  layer.output = a * t * c;
  for (int64_t i = 0; i < m.n_layer; ++i) blocks.push_back(layer);
  BlockCost head;
  head.parameters = 2 * m.n_embd + (m.tie_embeddings ? 0 : m.vocab_size * m.n_embd);
  head.padding = m.tie_embeddings ? 0 : padding;
  head.operands = m.tie_embeddings ? 0 : table;
  head.forward_flops = t * (5.0 * c + 2.0 * v * c);
  // ln_f's output (alive through the classifier's forward) and statistics;
  // the classifier's buffers are counted apart.
  head.saved = t * (a * c + 2.0 * kF32);
  head.largest = a * t * c;  // its backward's buffers: dh and ln_f's dx
  head.output = a * t * v;
  blocks.push_back(head);
  return blocks;
}

}  // namespace

std::string AttentionPathName(AttentionPath path) {
  switch (path) {
    case AttentionPath::kCudnnFlash: return "cudnn flash";
    case AttentionPath::kOwnFlash: return "flash (fp32 kernels)";
    case AttentionPath::kUnfused: return "unfused";
  }
  return "";
}

Storage StorageFor(const TrainerConfig& config, const DeviceProfile& device, const PlanOptions& options) {
  const nn::ModelConfig& m = config.model;
  Storage s;
  s.gpu = device.name != "cpu";
  s.sixteen_bit = config.compute_dtype == DType::kBF16 || config.compute_dtype == DType::kF16;
  const bool mixed_gpu = s.gpu && s.sixteen_bit;
  s.act = mixed_gpu && options.sixteen_bit_storage ? 2.0 : 4.0;
  s.operand_copies = mixed_gpu && options.sixteen_bit_storage;
  s.per_gemm_conversions = mixed_gpu && !options.sixteen_bit_storage;
  const bool gpt = m.kind == nn::ModelKind::kGpt;
  s.fused_classifier = gpt && options.fused_classifier;
  s.classes = gpt ? (s.fused_classifier ? PaddedVocab(m.vocab_size) : m.vocab_size) : m.num_classes;
  if (gpt && s.gpu && device.flash_attention) {
    const int64_t head_size = m.n_embd / std::max<int64_t>(m.n_head, 1);
    // engine/cuda/cudnn_sdpa.cc's SdpaSupported: 16-bit, a multiple of 8, the architecture's limit.
    if (s.operand_copies && head_size % 8 == 0 && head_size <= device.cudnn_attention_max_head_size) {
      s.attention = AttentionPath::kCudnnFlash;
    } else if (kernels::FlashAttentionSupports(head_size)) {
      s.attention = AttentionPath::kOwnFlash;
    }
  }
  return s;
}

Storage ReferenceStorage(const nn::ModelConfig& model) {
  Storage s;
  s.fused_classifier = model.kind == nn::ModelKind::kGpt;
  s.classes = s.fused_classifier ? PaddedVocab(model.vocab_size) : model.num_classes;
  return s;
}

std::vector<BlockCost> Blocks(const nn::ModelConfig& model, const Storage& storage) {
  return model.kind == nn::ModelKind::kGpt ? GptBlocks(model, storage) : ImageBlocks(model, storage);
}

int64_t BufferElements(const nn::ModelConfig& m) {
  if (m.kind != nn::ModelKind::kCnn) return 0;
  int64_t n = 0;
  for (int64_t c : m.conv_channels) n += 2 * c + 1;
  return n;
}

double BackwardScratchBytes(const nn::ModelConfig& m, const Storage& s, int64_t b) {
  if (m.kind != nn::ModelKind::kGpt || s.attention != AttentionPath::kCudnnFlash) return 0;
  const double bh = static_cast<double>(b) * m.n_head, t = static_cast<double>(m.block_size);
  // engine/cuda/cudnn_sdpa.h: the softmax sum [b, nh, t] f32, then either the
  // deterministic graph's dP [b, nh, t, t] in 16 bits or, past the workspace
  // cap, the fp32 dQ accumulator [b, nh, t, hd].
  const double dp = bh * t * t * 2.0;
  const double rest = dp <= static_cast<double>(kCudnnMaxWorkspaceBytes)
                          ? dp
                          : kF32 * static_cast<double>(b) * t * static_cast<double>(m.n_embd);
  return kF32 * bh * t + rest;
}

int64_t ClassifierChunkRowsFor(const nn::ModelConfig& m, const Storage& s, int64_t b) {
  if (!s.fused_classifier) return 0;
  return ClassifierChunkRows(b * m.block_size, s.classes, static_cast<int64_t>(s.act));
}

double ClassifierBytes(const nn::ModelConfig& m, const Storage& s, int64_t b, int in_flight) {
  const double a = s.act;
  if (s.fused_classifier) {
    // One chunk of logits (its gradient in place), and dh [B T, C] from each
    // micro-batch's forward to its backward.
    return a * static_cast<double>(ClassifierChunkRowsFor(m, s, b)) * s.classes +
           a * static_cast<double>(in_flight) * b * m.block_size * m.n_embd;
  }
  const double per_sample = m.kind == nn::ModelKind::kGpt ? static_cast<double>(m.block_size) * s.classes
                                                          : static_cast<double>(s.classes);
  return a * 2.0 * per_sample * b;  // the logits and their gradient
}

}  // namespace ringmaster::engine::plan::internal
