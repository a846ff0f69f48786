// Every layer's backward (input and parameter gradients) against central
// finite differences of its forward; tolerances in grad_check.h.

#include <algorithm>
#include <numeric>

#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "engine/nn/activation.h"
#include "engine/nn/conv.h"
#include "engine/nn/grad_check.h"
#include "engine/nn/linear.h"
#include "engine/nn/loss.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::nn {
namespace {

using engine::testing::RandomTensor;
using testing::GradCheck;
using testing::GradCheckOptions;
using testing::GradTarget;
using testing::WeightedSum;

// Checks dL/dx and dL/dparam of `layer` at x (L = sum(w * layer(x))).
void CheckBlock(Block& layer, const Tensor& x, bool check_input, GradCheckOptions options = {}) {
  for (Parameter* p : layer.Parameters()) std::fill(p->grad.f32(), p->grad.f32() + p->grad.numel(), 0.0f);
  layer.SetRngKey(7);
  absl::StatusOr<Tensor> y = layer.Forward(x, true);
  ASSERT_TRUE(y.ok()) << y.status();
  Tensor w = RandomTensor(y->shape(), 99);
  absl::StatusOr<Tensor> dx = layer.Backward(w);
  ASSERT_TRUE(dx.ok()) << dx.status();
  std::vector<GradTarget> targets;
  if (check_input) targets.push_back({"input", x, *dx});
  for (Parameter* p : layer.Parameters()) targets.push_back({p->name, p->value, p->grad});
  auto loss = [&] {
    layer.SetRngKey(7);
    return WeightedSum(layer.Forward(x, true).value(), w);
  };
  std::string report;
  EXPECT_LE(GradCheck(loss, targets, options, &report), 1.0) << layer.kind() << ": " << report;
}

class LayerGradTest : public ::testing::Test {
 protected:
  CpuBackend backend_{{2, DType::kF32}};
};

TEST_F(LayerGradTest, Linear) {
  Linear layer(backend_, "fc", 7, 5, true, 1);
  CheckBlock(layer, RandomTensor({2, 3, 7}, 2), true);
  Linear no_bias(backend_, "fc2", 4, 3, false, 1);
  EXPECT_EQ(no_bias.Parameters().size(), 1u);
  CheckBlock(no_bias, RandomTensor({5, 4}, 3), true);
}

// Values whose magnitude is at least 0.1, so eps = 1e-2 never crosses ReLU's kink.
Tensor AwayFromZero(const Shape& shape, uint64_t seed) {
  Tensor t = RandomTensor(shape, seed, 0.1f, 1.0f);
  for (int64_t i = 0; i < t.numel(); i += 2) t.f32()[i] = -t.f32()[i];
  return t;
}

TEST_F(LayerGradTest, Relu) {
  Relu layer(backend_, "relu");
  CheckBlock(layer, AwayFromZero({3, 10}, 4), true);
}

TEST_F(LayerGradTest, Gelu) {
  Gelu layer(backend_, "gelu");
  CheckBlock(layer, RandomTensor({3, 10}, 5, -3.0f, 3.0f), true);
}

TEST_F(LayerGradTest, DropoutWithFixedKey) {
  Dropout layer(backend_, "drop", 0.4f, 6);
  CheckBlock(layer, RandomTensor({4, 25}, 7), true);
}

TEST_F(LayerGradTest, Flatten) {
  Flatten layer("flat");
  Tensor x = RandomTensor({2, 3, 4, 5}, 8);
  absl::StatusOr<Tensor> y = layer.Forward(x, true);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->shape(), (Shape{2, 60}));
  CheckBlock(layer, x, true);
}

TEST_F(LayerGradTest, Conv2dPadded) {
  Conv2d layer(backend_, "conv", 2, 3, 3, 1, 1, true, 9);
  CheckBlock(layer, RandomTensor({2, 2, 5, 6}, 10), true);
}

TEST_F(LayerGradTest, Conv2dStridedNoBias) {
  Conv2d layer(backend_, "conv", 3, 2, 3, 2, 0, false, 11);
  CheckBlock(layer, RandomTensor({2, 3, 7, 7}, 12), true);
}

TEST_F(LayerGradTest, MaxPool2d) {
  // Distinct values 0.05 apart, shuffled: no ties within eps.
  const int64_t n = 2 * 3 * 6 * 6;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = -2.0f + 0.05f * static_cast<float>((i * 37) % n);
  Tensor x = Tensor::FromVector({2, 3, 6, 6}, v);
  MaxPool2d layer(backend_, "pool", 2, 2);
  CheckBlock(layer, x, true, {.eps = 1e-2f, .atol = 2e-3, .rtol = 2e-2, .max_elements = 216});
}

TEST_F(LayerGradTest, BatchNorm2dTraining) {
  BatchNorm2d layer(backend_, "bn", 3);
  // Non-trivial affine parameters.
  for (int c = 0; c < 3; ++c) {
    layer.Parameters()[0]->value.f32()[c] = 0.5f + 0.3f * c;
    layer.Parameters()[1]->value.f32()[c] = -0.2f * c;
  }
  CheckBlock(layer, RandomTensor({4, 3, 3, 3}, 13, -2.0f, 2.0f), true, {.eps = 1e-2f, .atol = 3e-3, .rtol = 2e-2});
}

TEST_F(LayerGradTest, BatchNorm2dRunningStatsAndEval) {
  BatchNorm2d layer(backend_, "bn", 2, 0.1f, 1e-5f);
  Tensor x = RandomTensor({8, 2, 4, 4}, 14, 1.0f, 3.0f);
  ASSERT_TRUE(layer.Forward(x, true).ok());
  BufferList buffers = layer.Buffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(buffers[0]->name, "bn.running_mean");
  EXPECT_EQ(buffers[1]->name, "bn.running_var");
  EXPECT_EQ(buffers[2]->name, "bn.num_batches_tracked");
  EXPECT_EQ(buffers[2]->value.ToVector()[0], 1.0f);
  // mean of U(1, 3) is about 2: running_mean = 0.1 * batch mean.
  EXPECT_NEAR(buffers[0]->value.ToVector()[0], 0.2f, 0.03f);
  // Eval uses running statistics: output differs from the training output.
  Tensor y_train = layer.Forward(x, true).value();
  Tensor y_eval = layer.Forward(x, false).value();
  EXPECT_GT(engine::testing::MaxAbsDiff(y_train.ToVector(), y_eval.ToVector()), 0.1);
}

TEST_F(LayerGradTest, SoftmaxCrossEntropy) {
  SoftmaxCrossEntropy loss_layer(backend_, -100);
  Tensor logits = RandomTensor({6, 5}, 15, -2.0f, 2.0f);
  Tensor targets = Tensor::FromInts({6}, {0, 4, -100, 2, 2, 1});
  ASSERT_TRUE(loss_layer.Forward(logits, targets, true).ok());
  Tensor dlogits = loss_layer.Backward().value();
  auto loss = [&] { return static_cast<double>(loss_layer.Forward(logits, targets, false).value().ToVector()[0]); };
  std::string report;
  EXPECT_LE(GradCheck(loss, {{"logits", logits, dlogits}}, {.eps = 1e-2f, .atol = 1e-4, .rtol = 1e-2}, &report), 1.0)
      << report;
}

TEST_F(LayerGradTest, ErrorsAreStatuses) {
  Linear layer(backend_, "fc", 4, 3, true, 1);
  absl::StatusOr<Tensor> bad = layer.Forward(RandomTensor({2, 5}, 1), true);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer.Backward(RandomTensor({2, 3}, 1)).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(layer.Forward(RandomTensor({2, 4}, 1), true).ok());
  EXPECT_EQ(layer.Backward(RandomTensor({3, 3}, 1)).status().code(), absl::StatusCode::kInvalidArgument);
  Conv2d conv(backend_, "conv", 1, 2, 3, 1, 0, false, 1);
  EXPECT_EQ(conv.Forward(RandomTensor({1, 2, 5, 5}, 1), true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(conv.Forward(RandomTensor({1, 1, 2, 2}, 1), true).status().code(), absl::StatusCode::kInvalidArgument);
  SoftmaxCrossEntropy xent(backend_);
  EXPECT_EQ(xent.Forward(RandomTensor({2, 3}, 1), Tensor::FromInts({2}, {0, 3}), true).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LayerGradTest, MicroBatchCachesAreIndependent) {
  Linear layer(backend_, "fc", 3, 2, true, 1);
  Tensor x0 = RandomTensor({4, 3}, 1), x1 = RandomTensor({4, 3}, 2), dy = RandomTensor({4, 2}, 3);
  ASSERT_TRUE(layer.Forward(x0, true, 0).ok());
  ASSERT_TRUE(layer.Forward(x1, true, 1).ok());
  Tensor dx1 = layer.Backward(dy, 1).value();
  std::vector<float> grad_after_1 = layer.weight().grad.ToVector();
  Tensor dx0 = layer.Backward(dy, 0).value();
  // dW from micro-batch 1 alone equals dy^T x1.
  std::vector<float> xv = x1.ToVector(), dv = dy.ToVector();
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i) {
      float want = 0.0f;
      for (int r = 0; r < 4; ++r) want += dv[r * 2 + o] * xv[r * 3 + i];
      EXPECT_NEAR(grad_after_1[o * 3 + i], want, 1e-5);
    }
  EXPECT_EQ(layer.Backward(dy, 0).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ringmaster::engine::nn
