// End-to-end: models overfit a small fixed batch with plain SGD written here
// (the real optimizers live in engine/optim), and training is bitwise
// reproducible for the same seed and thread count.

#include <cmath>

#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "engine/nn/loss.h"
#include "engine/nn/model_factory.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::nn {
namespace {

using engine::testing::BitwiseEqual;
using engine::testing::RandomTensor;

// One SGD step: p -= lr * grad. Returns the loss before the step.
float SgdStep(Model& model, SoftmaxCrossEntropy& xent, const Tensor& x, const Tensor& y, float lr) {
  model.ZeroGrad();
  Tensor logits = model.Forward(x, true).value();
  float loss = xent.Forward(logits, y, true).value().ToVector()[0];
  EXPECT_TRUE(model.Backward(xent.Backward().value()).ok());
  for (Parameter* p : model.Parameters()) model.backend().Axpy(-lr, p->grad, p->value);
  return loss;
}

std::vector<float> Train(const ModelConfig& config, DType compute, int threads, int steps, float lr,
                         std::vector<Tensor>* final_params = nullptr) {
  CpuBackend backend({threads, compute});
  auto model = BuildModel(config, backend).value();
  SoftmaxCrossEntropy xent(backend);
  Tensor x = RandomTensor({16, 1, 12, 12}, 1234);
  std::vector<int32_t> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = i % 10;
  Tensor y = Tensor::FromInts({16}, labels);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    model->SetRngKey(s);
    losses.push_back(SgdStep(*model, xent, x, y, lr));
  }
  if (final_params != nullptr)
    for (Parameter* p : model->Parameters()) final_params->push_back(p->value);
  return losses;
}

ModelConfig SmallMlp() {
  ModelConfig c;
  c.kind = ModelKind::kMlp;
  c.input_height = c.input_width = 12;
  c.hidden_sizes = {64, 32};
  c.seed = 5;
  return c;
}

ModelConfig SmallCnn() {
  ModelConfig c;
  c.kind = ModelKind::kCnn;
  c.input_height = c.input_width = 12;
  c.conv_channels = {4, 8};
  c.cnn_hidden_sizes = {32};
  c.dropout = 0.1f;
  c.seed = 6;
  return c;
}

TEST(TrainingTest, MlpOverfitsFixedBatch) {
  // 16 random images with 10 labels: a 2-hidden-layer MLP memorises them.
  std::vector<float> losses = Train(SmallMlp(), DType::kF32, 2, 150, 0.1f);
  EXPECT_NEAR(losses.front(), std::log(10.0f), 0.5f);  // chance level at init
  EXPECT_LT(losses.back(), losses.front() / 20.0f) << "first " << losses.front() << " last " << losses.back();
}

TEST(TrainingTest, CnnOverfitsFixedBatch) {
  std::vector<float> losses = Train(SmallCnn(), DType::kF32, 2, 100, 0.1f);
  EXPECT_LT(losses.back(), losses.front() / 10.0f) << "first " << losses.front() << " last " << losses.back();
}

TEST(TrainingTest, Bf16TrainingTracksF32) {
  std::vector<float> f32 = Train(SmallMlp(), DType::kF32, 2, 150, 0.1f);
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<float> low = Train(SmallMlp(), t, 2, 150, 0.1f);
    EXPECT_NE(f32, low) << DTypeName(t);                          // rounding is applied
    EXPECT_NEAR(low.front(), f32.front(), 0.02f) << DTypeName(t);  // same model at step 0
    // It learns as well: within a factor of 3 of the f32 loss after 150 steps.
    EXPECT_LT(low.back(), 3.0f * f32.back() + 0.02f) << DTypeName(t) << " " << low.back() << " vs " << f32.back();
  }
}

TEST(TrainingTest, SameSeedAndThreadsGiveBitwiseEqualTraining) {
  for (int threads : {1, 2}) {
    std::vector<Tensor> a, b;
    std::vector<float> la = Train(SmallCnn(), DType::kF32, threads, 5, 0.05f, &a);
    std::vector<float> lb = Train(SmallCnn(), DType::kF32, threads, 5, 0.05f, &b);
    EXPECT_EQ(la, lb);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(BitwiseEqual(a[i], b[i])) << "parameter " << i;
  }
}

TEST(TrainingTest, GptOverfitsFixedSequence) {
  ModelConfig c;
  c.kind = ModelKind::kGpt;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 32;
  c.seed = 7;
  CpuBackend backend({2, DType::kF32});
  auto model = BuildModel(c, backend).value();
  SoftmaxCrossEntropy xent(backend);
  std::vector<int32_t> tok(2 * 17);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = static_cast<int32_t>((i * 7 + i / 3) % 32);
  std::vector<int32_t> in, out;
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 16; ++t) {
      in.push_back(tok[b * 17 + t]);
      out.push_back(tok[b * 17 + t + 1]);
    }
  Tensor x = Tensor::FromInts({2, 16}, in), y = Tensor::FromInts({2, 16}, out);
  std::vector<float> losses;
  for (int s = 0; s < 80; ++s) losses.push_back(SgdStep(*model, xent, x, y, 0.5f));
  EXPECT_NEAR(losses.front(), std::log(32.0f), 0.3f);
  EXPECT_LT(losses.back(), losses.front() / 5.0f) << "first " << losses.front() << " last " << losses.back();
}

}  // namespace
}  // namespace ringmaster::engine::nn
