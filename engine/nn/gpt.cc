#include "engine/nn/gpt.h"

#include <cmath>

#include "common/status_macros.h"
#include "engine/core/classifier_geometry.h"
#include "engine/nn/init.h"

namespace ringmaster::engine::nn {

TransformerBlock::TransformerBlock(Backend& backend, std::string prefix, const ModelConfig& c)
    : backend_(backend),
      prefix_(std::move(prefix)),
      channels_(c.n_embd),
      ln_1_(backend, prefix_ + ".ln_1", c.n_embd, c.ln_eps),
      attn_(backend, prefix_ + ".attn", c.n_embd, c.n_head, c.n_layer, c.seed),
      ln_2_(backend, prefix_ + ".ln_2", c.n_embd, c.ln_eps),
      c_fc_(backend, prefix_ + ".mlp.c_fc", c.n_embd, 4 * c.n_embd, true, c.seed),
      c_proj_(backend, prefix_ + ".mlp.c_proj", 4 * c.n_embd, c.n_embd, true, c.seed) {
  InitGpt2Linear(backend, c_fc_, 0.02, c.seed);
  InitGpt2Linear(backend, c_proj_, 0.02 / std::sqrt(2.0 * c.n_layer), c.seed);
}

absl::StatusOr<Tensor> TransformerBlock::Forward(const Tensor& x, bool training, int mb) {
  RETURN_IF_ERROR(CheckInput(prefix_, x, 3, 2, channels_));
  ASSIGN_OR_RETURN(Tensor a, ln_1_.Forward(x, training, mb));
  ASSIGN_OR_RETURN(a, attn_.Forward(a, training, mb));
  Tensor h;  // x + a, the residual stream
  ASSIGN_OR_RETURN(Tensor m, ln_2_.AddForward(x, a, training, mb, &h));
  ASSIGN_OR_RETURN(m, c_fc_.ForwardGelu(m, training, mb));
  ASSIGN_OR_RETURN(m, c_proj_.Forward(m, training, mb));
  Tensor out = backend_.EmptyActivation(x.shape());
  backend_.Add(h, m, out);
  return out;
}

absl::StatusOr<Tensor> TransformerBlock::Backward(const Tensor& dy, int mb) {
  // out = h + mlp(ln_2(h)):  dh = dy + ln_2'(mlp'(dy))
  ASSIGN_OR_RETURN(Tensor g, c_proj_.Backward(dy, mb));
  ASSIGN_OR_RETURN(g, c_fc_.BackwardGelu(g, mb));
  Tensor dh = backend_.EmptyActivation(dy.shape());
  RETURN_IF_ERROR(ln_2_.BackwardAdd(g, mb, dy, dh));
  // h = x + attn(ln_1(x)):  dx = dh + ln_1'(attn'(dh)), accumulated into dh
  // (attn' has consumed it).
  ASSIGN_OR_RETURN(g, attn_.Backward(dh, mb));
  RETURN_IF_ERROR(ln_1_.BackwardAdd(g, mb, dh, dh));
  return dh;
}

ParameterList TransformerBlock::Parameters() {
  ParameterList list;
  for (Block* b : std::initializer_list<Block*>{&ln_1_, &attn_, &ln_2_, &c_fc_, &c_proj_})
    for (Parameter* p : b->Parameters()) list.push_back(p);
  return list;
}

LmHead::LmHead(Backend& backend, const ModelConfig& c, Parameter* tied_weight)
    : backend_(backend),
      channels_(c.n_embd),
      vocab_(c.vocab_size),
      ln_f_(backend, "transformer.ln_f", c.n_embd, c.ln_eps),
      weight_(tied_weight),
      chunk_bytes_(kClassifierChunkBytes) {
  if (weight_ == nullptr) {
    own_weight_ = MakeVocabularyTable(backend, "lm_head.weight", c.vocab_size, c.n_embd, c.seed);
    weight_ = &own_weight_;
  }
}

absl::StatusOr<Tensor> LmHead::Forward(const Tensor& x, bool training, int mb) {
  RETURN_IF_ERROR(CheckInput("lm_head", x, 3, 2, channels_));
  ASSIGN_OR_RETURN(Tensor h, ln_f_.Forward(x, training, mb));
  Tensor logits = backend_.EmptyActivation({x.dim(0), x.dim(1), vocab_});
  backend_.Gemm(false, true, 1.0f, h, weight_->operand().Rows(0, vocab_), 0.0f, logits);
  if (training) inputs_.Put(mb, h);
  return logits;
}

absl::StatusOr<Tensor> LmHead::ForwardLoss(const Tensor& x, const Tensor& targets, int32_t ignore_index,
                                           float grad_scale, bool training, int mb) {
  RETURN_IF_ERROR(CheckInput("lm_head", x, 3, 2, channels_));
  const int64_t rows = x.numel() / channels_;
  if (!targets.defined() || targets.dtype() != DType::kI32 || targets.numel() != rows)
    return absl::InvalidArgumentError(absl::StrCat("lm_head: ", targets.defined() ? targets.numel() : 0,
                                                   " i32 targets for ", rows, " rows"));
  ASSIGN_OR_RETURN(Tensor h, ln_f_.Forward(x, training, mb));
  h = h.View({rows, channels_});
  const Tensor flat_targets = targets.View({rows});
  const Tensor& w = weight_->operand();  // [padded V, C]
  const int64_t padded = w.dim(0);
  Tensor count = backend_.Empty({1});
  backend_.CountTargets(flat_targets, ignore_index, count);
  Tensor loss = backend_.Zeros({1});
  const int64_t chunk = ClassifierChunkRows(rows, padded, DTypeSize(backend_.activation_dtype()), chunk_bytes_);
  Tensor buffer = backend_.EmptyActivation({chunk, padded});
  Tensor dh = training ? backend_.EmptyActivation({rows, channels_}) : Tensor();
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t r1 = std::min(rows, r0 + chunk);
    const Tensor logits = buffer.Rows(0, r1 - r0);
    const Tensor hc = h.Rows(r0, r1);
    backend_.Gemm(false, true, 1.0f, hc, w, 0.0f, logits);
    backend_.SoftmaxCrossEntropyChunk(logits, vocab_, flat_targets.Rows(r0, r1), ignore_index, count, grad_scale,
                                      loss, training ? &logits : nullptr);
    if (!training) continue;
    backend_.Gemm(false, false, 1.0f, logits, w, 0.0f, dh.Rows(r0, r1));  // dh = dlogits @ W
    backend_.Gemm(true, false, 1.0f, logits, hc, 1.0f, weight_->grad);    // dW += dlogits^T h
  }
  if (training) input_grads_.Put(mb, dh.View(x.shape()));
  return loss;
}

absl::StatusOr<Tensor> LmHead::Backward(const Tensor& dy, int mb) {
  if (input_grads_.Has(mb)) {
    ASSIGN_OR_RETURN(Tensor dh, input_grads_.Take(mb, "lm_head"));
    return ln_f_.Backward(dh, mb);
  }
  ASSIGN_OR_RETURN(Tensor h, inputs_.Take(mb, "lm_head"));
  if (dy.numel() != h.numel() / channels_ * vocab_)
    return absl::InvalidArgumentError(absl::StrCat("lm_head: grad ", ShapeString(dy.shape())));
  backend_.Gemm(true, false, 1.0f, dy, h, 1.0f, weight_->grad.Rows(0, vocab_));  // dW[V, C] += dy^T h
  Tensor dh = backend_.EmptyActivation(h.shape());
  backend_.Gemm(false, false, 1.0f, dy, weight_->operand().Rows(0, vocab_), 0.0f, dh);
  return ln_f_.Backward(dh, mb);
}

ParameterList LmHead::Parameters() {
  ParameterList list = ln_f_.Parameters();
  list.push_back(weight_);
  return list;
}

absl::StatusOr<std::unique_ptr<Model>> BuildGpt(const ModelConfig& c, Backend& backend) {
  if (c.n_layer <= 0 || c.n_head <= 0 || c.n_embd <= 0 || c.block_size <= 0 || c.vocab_size <= 0)
    return absl::InvalidArgumentError("gpt: n_layer, n_head, n_embd, block_size and vocab_size must be positive");
  if (c.n_embd % c.n_head != 0)
    return absl::InvalidArgumentError(absl::StrCat("gpt: n_embd ", c.n_embd, " not divisible by n_head ", c.n_head));
  auto m = std::make_unique<Model>(backend, "gpt");
  auto embedding = std::make_unique<Embedding>(backend, c.vocab_size, c.block_size, c.n_embd, c.seed);
  Parameter* wte = &embedding->wte();
  m->Add(std::move(embedding));
  for (int64_t i = 0; i < c.n_layer; ++i)
    m->Add(std::make_unique<TransformerBlock>(backend, absl::StrCat("transformer.h.", i), c));
  m->Add(std::make_unique<LmHead>(backend, c, c.tie_embeddings ? wte : nullptr));
  return m;
}

}  // namespace ringmaster::engine::nn
