// GPT layers' backward against central finite differences: LayerNorm,
// Embedding, CausalSelfAttention, TransformerBlock, LmHead (tied and untied).

#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "engine/nn/gpt.h"
#include "engine/nn/grad_check.h"
#include "engine/nn/transformer_layers.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::nn {
namespace {

using engine::testing::RandomTensor;
using testing::GradCheck;
using testing::GradCheckOptions;
using testing::GradTarget;
using testing::WeightedSum;

void CheckBlock(Block& layer, const Tensor& x, bool check_input, GradCheckOptions options = {}) {
  for (Parameter* p : layer.Parameters()) std::fill(p->grad.f32(), p->grad.f32() + p->grad.numel(), 0.0f);
  absl::StatusOr<Tensor> y = layer.Forward(x, true);
  ASSERT_TRUE(y.ok()) << y.status();
  Tensor w = RandomTensor(y->shape(), 99);
  absl::StatusOr<Tensor> dx = layer.Backward(w);
  ASSERT_TRUE(dx.ok()) << dx.status();
  std::vector<GradTarget> targets;
  if (check_input) targets.push_back({"input", x, *dx});
  for (Parameter* p : layer.Parameters()) targets.push_back({p->name, p->value, p->grad});
  auto loss = [&] { return WeightedSum(layer.Forward(x, true).value(), w); };
  std::string report;
  EXPECT_LE(GradCheck(loss, targets, options, &report), 1.0) << layer.kind() << ": " << report;
}

ModelConfig TinyGpt() {
  ModelConfig c;
  c.kind = ModelKind::kGpt;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 6;
  c.vocab_size = 11;
  c.seed = 3;
  return c;
}

class TransformerGradTest : public ::testing::Test {
 protected:
  CpuBackend backend_{{2, DType::kF32}};
};

TEST_F(TransformerGradTest, LayerNorm) {
  LayerNorm layer(backend_, "ln", 8);
  for (int j = 0; j < 8; ++j) {
    layer.Parameters()[0]->value.f32()[j] = 0.5f + 0.1f * j;
    layer.Parameters()[1]->value.f32()[j] = 0.05f * j;
  }
  CheckBlock(layer, RandomTensor({2, 3, 8}, 1, -2.0f, 2.0f), true);
}

TEST_F(TransformerGradTest, EmbeddingScatterAdd) {
  Embedding layer(backend_, 7, 5, 4, 2);
  Tensor tokens = Tensor::FromInts({2, 4}, {1, 3, 3, 0, 6, 1, 1, 1});
  CheckBlock(layer, tokens, false);
  EXPECT_EQ(layer.Forward(Tensor::FromInts({1, 2}, {1, 7}), true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.Forward(Tensor::FromInts({1, 6}, {1, 1, 1, 1, 1, 1}), true).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TransformerGradTest, CausalSelfAttention) {
  CausalSelfAttention layer(backend_, "attn", 8, 2, 1, 4);
  // GPT-2's init (std 0.02) gives near-uniform attention; larger weights test the softmax path.
  for (Parameter* p : layer.Parameters())
    for (int64_t i = 0; i < p->value.numel(); ++i) p->value.f32()[i] *= 20.0f;
  CheckBlock(layer, RandomTensor({2, 5, 8}, 5), true, {.eps = 1e-2f, .atol = 3e-3, .rtol = 3e-2});
}

TEST_F(TransformerGradTest, TransformerBlock) {
  ModelConfig c = TinyGpt();
  TransformerBlock block(backend_, "transformer.h.0", c);
  for (Parameter* p : block.Parameters())
    if (p->decay)
      for (int64_t i = 0; i < p->value.numel(); ++i) p->value.f32()[i] *= 10.0f;
  CheckBlock(block, RandomTensor({2, 5, 8}, 6), true, {.eps = 1e-2f, .atol = 3e-3, .rtol = 3e-2, .max_elements = 12});
}

TEST_F(TransformerGradTest, LmHeadUntied) {
  ModelConfig c = TinyGpt();
  LmHead head(backend_, c, nullptr);
  CheckBlock(head, RandomTensor({2, 3, 8}, 7), true);
  EXPECT_EQ(head.Parameters().back()->name, "lm_head.weight");
}

class WholeGpt : public TransformerGradTest, public ::testing::WithParamInterface<std::tuple<int, bool>> {};

TEST_P(WholeGpt, Gradients) {
  ModelConfig c = TinyGpt();
  c.n_layer = std::get<0>(GetParam());
  c.tie_embeddings = std::get<1>(GetParam());
  auto model = BuildModel(c, backend_).value();
  // GPT-2's init puts the residual stream at std 0.02, where a finite-difference
  // step of 1e-2 is far from linear through LayerNorm: scale weights to order 1.
  for (Parameter* p : model->Parameters())
    if (p->decay)
      for (int64_t i = 0; i < p->value.numel(); ++i) p->value.f32()[i] *= 40.0f;
  Tensor tokens = Tensor::FromInts({2, 6}, {1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 0, 0});
  Tensor logits = model->Forward(tokens, true).value();
  Tensor w = RandomTensor(logits.shape(), 8);
  model->ZeroGrad();
  ASSERT_TRUE(model->Backward(w).ok());
  auto loss = [&] { return WeightedSum(model->Forward(tokens, true).value(), w); };
  for (Parameter* p : model->Parameters()) {
    std::string report;
    EXPECT_LE(GradCheck(loss, {{p->name, p->value, p->grad}}, {.eps = 1e-2f, .atol = 2e-3, .rtol = 3e-2, .max_elements = 6}, &report), 1.0)
        << report;
  }
}

INSTANTIATE_TEST_SUITE_P(LayersAndTying, WholeGpt, ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()));

}  // namespace
}  // namespace ringmaster::engine::nn
