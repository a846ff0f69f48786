#include "engine/nn/transformer_layers.h"

#include <cmath>

#include "common/status_macros.h"
#include "engine/core/classifier_geometry.h"
#include "engine/nn/init.h"

namespace ringmaster::engine::nn {

Parameter MakeVocabularyTable(Backend& backend, std::string name, int64_t vocab, int64_t channels, uint64_t seed) {
  const int64_t padded = PaddedVocab(vocab);
  Parameter p = MakeParameter(backend, std::move(name), {padded, channels}, /*decay=*/true, /*operand=*/true);
  InitNormal(backend, p, 0.02, seed);
  if (padded != vocab) {
    backend.Fill(p.value.Rows(vocab, padded), 0.0f);
    p.real_rows = vocab;
  }
  return p;
}

void InitGpt2Linear(Backend& backend, Linear& linear, double std, uint64_t seed) {
  InitNormal(backend, linear.weight(), std, seed);
  if (linear.bias().value.defined()) backend.Fill(linear.bias().value, 0.0f);
}

LayerNorm::LayerNorm(Backend& backend, std::string prefix, int64_t channels, float eps)
    : backend_(backend), prefix_(std::move(prefix)), channels_(channels), eps_(eps) {
  weight_ = MakeParameter(backend, prefix_ + ".weight", {channels}, false);
  bias_ = MakeParameter(backend, prefix_ + ".bias", {channels}, false);
  InitConstant(backend, weight_.value, 1.0f);
}

absl::StatusOr<Tensor> LayerNorm::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(prefix_, x, -1, -1, channels_));
  const int64_t rows = x.numel() / channels_;
  Cache c{x, backend_.Empty({rows}), backend_.Empty({rows})};
  Tensor y = backend_.EmptyActivation(x.shape());
  backend_.LayerNormForward(x, weight_.value, bias_.value, eps_, y, c.mean, c.rstd);
  if (training) caches_.Put(micro_batch, std::move(c));
  return y;
}

absl::StatusOr<Tensor> LayerNorm::AddForward(const Tensor& a, const Tensor& b, bool training, int micro_batch,
                                             Tensor* sum) {
  RETURN_IF_ERROR(CheckInput(prefix_, a, -1, -1, channels_));
  if (b.shape() != a.shape())
    return absl::InvalidArgumentError(
        absl::StrCat(prefix_, ": residual add of ", ShapeString(a.shape()), " and ", ShapeString(b.shape())));
  const int64_t rows = a.numel() / channels_;
  Cache c{backend_.EmptyActivation(a.shape()), backend_.Empty({rows}), backend_.Empty({rows})};
  Tensor y = backend_.EmptyActivation(a.shape());
  backend_.AddLayerNormForward(a, b, weight_.value, bias_.value, eps_, c.x, y, c.mean, c.rstd);
  *sum = c.x;
  if (training) caches_.Put(micro_batch, std::move(c));
  return y;
}

absl::StatusOr<LayerNorm::Cache> LayerNorm::TakeCache(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Cache c, caches_.Take(micro_batch, prefix_));
  if (dy.shape() != c.x.shape())
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": grad ", ShapeString(dy.shape())));
  return c;
}

absl::StatusOr<Tensor> LayerNorm::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Cache c, TakeCache(dy, micro_batch));
  Tensor dx = backend_.EmptyActivation(c.x.shape());
  backend_.LayerNormBackward(c.x, dy, weight_.value, c.mean, c.rstd, dx, weight_.grad, bias_.grad);
  return dx;
}

absl::Status LayerNorm::BackwardAdd(const Tensor& dy, int micro_batch, const Tensor& residual, const Tensor& dx) {
  ASSIGN_OR_RETURN(Cache c, TakeCache(dy, micro_batch));
  if (residual.shape() != c.x.shape() || dx.shape() != c.x.shape())
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": residual grad ", ShapeString(residual.shape())));
  backend_.AddLayerNormBackward(c.x, dy, weight_.value, c.mean, c.rstd, residual, dx, weight_.grad, bias_.grad);
  return absl::OkStatus();
}

Embedding::Embedding(Backend& backend, int64_t vocab_size, int64_t block_size, int64_t channels, uint64_t seed)
    : backend_(backend), vocab_(vocab_size), block_size_(block_size), channels_(channels) {
  wte_ = MakeVocabularyTable(backend, "transformer.wte.weight", vocab_size, channels, seed);
  wpe_ = MakeParameter(backend, "transformer.wpe.weight", {block_size, channels}, true);
  InitNormal(backend, wpe_, 0.02, seed);
}

absl::StatusOr<Tensor> Embedding::Forward(const Tensor& tokens, bool training, int micro_batch) {
  if (!tokens.defined() || tokens.dtype() != DType::kI32 || tokens.rank() != 2)
    return absl::InvalidArgumentError("transformer.wte: tokens must be i32 [B, T]");
  if (tokens.dim(1) > block_size_ || tokens.dim(1) == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("transformer.wte: sequence length ", tokens.dim(1), " outside [1, ", block_size_, "]"));
  if (tokens.device() == Device::kCpu) {
    for (int64_t i = 0; i < tokens.numel(); ++i)
      if (tokens.i32()[i] < 0 || tokens.i32()[i] >= vocab_)
        return absl::InvalidArgumentError(
            absl::StrCat("transformer.wte: token ", tokens.i32()[i], " outside [0, ", vocab_, ")"));
  }
  Tensor out = backend_.EmptyActivation({tokens.dim(0), tokens.dim(1), channels_});
  backend_.EmbeddingForward(tokens, wte_.value, wpe_.value, out);
  if (training) tokens_.Put(micro_batch, tokens);
  return out;
}

absl::StatusOr<Tensor> Embedding::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor tokens, tokens_.Take(micro_batch, "transformer.wte"));
  if (dy.numel() != tokens.numel() * channels_)
    return absl::InvalidArgumentError(absl::StrCat("transformer.wte: grad ", ShapeString(dy.shape())));
  backend_.EmbeddingBackward(tokens, dy, wte_.grad, wpe_.grad);
  return Tensor();
}

CausalSelfAttention::CausalSelfAttention(Backend& backend, std::string prefix, int64_t channels, int64_t n_head,
                                         int64_t n_layer, uint64_t seed)
    : backend_(backend),
      prefix_(std::move(prefix)),
      channels_(channels),
      n_head_(n_head),
      c_attn_(backend, prefix_ + ".c_attn", channels, 3 * channels, true, seed),
      c_proj_(backend, prefix_ + ".c_proj", channels, channels, true, seed) {
  InitGpt2Linear(backend, c_attn_, 0.02, seed);
  InitGpt2Linear(backend, c_proj_, 0.02 / std::sqrt(2.0 * n_layer), seed);
}

absl::StatusOr<Tensor> CausalSelfAttention::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(prefix_, x, 3, 2, channels_));
  ASSIGN_OR_RETURN(Tensor qkv, c_attn_.Forward(x, training, micro_batch));
  const int64_t b = x.dim(0), t = x.dim(1);
  Tensor saved = backend_.Empty(backend_.AttentionSavedShape(b, n_head_, t, channels_ / n_head_));
  Tensor y = backend_.EmptyActivation({b, t, channels_});
  backend_.AttentionForward(qkv, n_head_, saved, y);
  if (training) caches_.Put(micro_batch, Cache{qkv, saved, y});
  return c_proj_.Forward(y, training, micro_batch);
}

absl::StatusOr<Tensor> CausalSelfAttention::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Cache c, caches_.Take(micro_batch, prefix_));
  ASSIGN_OR_RETURN(Tensor dattn, c_proj_.Backward(dy, micro_batch));
  Tensor dqkv = backend_.EmptyActivation(c.qkv.shape());
  backend_.AttentionBackward(c.qkv, c.saved, c.out, dattn, n_head_, dqkv);
  return c_attn_.Backward(dqkv, micro_batch);
}

ParameterList CausalSelfAttention::Parameters() {
  ParameterList list = c_attn_.Parameters();
  for (Parameter* p : c_proj_.Parameters()) list.push_back(p);
  return list;
}

}  // namespace ringmaster::engine::nn
