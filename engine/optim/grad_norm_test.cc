#include "engine/optim/grad_norm.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace ringmaster::engine::optim {
namespace {

// Two parameters with grads [3, 4] and [12] (norm sqrt(9 + 16 + 144) = 13),
// stored times `loss_scale`.
struct Grads {
  explicit Grads(float loss_scale) {
    a.name = "a";
    a.value = Tensor::Zeros({2});
    a.grad = Tensor::FromVector({2}, {3.0f * loss_scale, 4.0f * loss_scale});
    b.name = "b";
    b.value = Tensor::Zeros({1, 1});
    b.grad = Tensor::FromVector({1, 1}, {12.0f * loss_scale});
  }
  ParameterList list() { return {&a, &b}; }
  Parameter a, b;
};

TEST(GradNormTest, GlobalNormOfTrueGradients) {
  Grads g(1024.0f);
  EXPECT_DOUBLE_EQ(*GradSumSquares(g.list()), 169.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*GlobalGradNorm(g.list(), 1.0f / 1024.0f), 13.0);
  Grads plain(1.0f);
  EXPECT_DOUBLE_EQ(*GlobalGradNorm(plain.list(), 1.0f), 13.0);
  EXPECT_DOUBLE_EQ(*GlobalGradNorm({}, 1.0f), 0.0);
}

TEST(GradNormTest, ClipCoefficientIsPyTorchs) {
  EXPECT_FLOAT_EQ(ClipCoefficient(13.0, 1.0f), static_cast<float>(1.0 / (13.0 + 1e-6)));
  EXPECT_EQ(ClipCoefficient(13.0, 20.0f), 1.0f);  // never grows grads
  EXPECT_EQ(ClipCoefficient(13.0, 0.0f), 1.0f);   // clipping off
  EXPECT_EQ(ClipCoefficient(INFINITY, 1.0f), 1.0f);
  EXPECT_EQ(ClipCoefficient(NAN, 1.0f), 1.0f);
}

TEST(GradNormTest, ClipGradNormScalesStoredGradsToMaxNorm) {
  Grads g(256.0f);
  auto norm = ClipGradNorm(g.list(), 6.5f, 1.0f / 256.0f);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_DOUBLE_EQ(*norm, 13.0);  // before clipping
  // Stored grads keep the loss scale; true grads are halved (6.5 / 13).
  EXPECT_NEAR(g.a.grad.f32()[0], 1.5 * 256, 1e-3);
  EXPECT_NEAR(g.a.grad.f32()[1], 2.0 * 256, 1e-3);
  EXPECT_NEAR(g.b.grad.f32()[0], 6.0 * 256, 1e-3);
  EXPECT_NEAR(*GlobalGradNorm(g.list(), 1.0f / 256.0f), 6.5, 1e-5);
  // Under max_norm: untouched.
  Grads small(1.0f);
  ASSERT_TRUE(ClipGradNorm(small.list(), 100.0f, 1.0f).ok());
  EXPECT_EQ(small.b.grad.f32()[0], 12.0f);
}

TEST(GradNormTest, FindsNonFiniteGrads) {
  Grads g(1.0f);
  EXPECT_FALSE(*HasNonFiniteGrad(g.list()));
  g.b.grad.f32()[0] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(*HasNonFiniteGrad(g.list()));
  EXPECT_TRUE(std::isinf(*GlobalGradNorm(g.list(), 1.0f)));
  g.b.grad.f32()[0] = 1.0f;
  g.a.grad.f32()[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(*HasNonFiniteGrad(g.list()));
  EXPECT_TRUE(std::isnan(*GlobalGradNorm(g.list(), 1.0f)));
}

TEST(GradNormTest, RejectsGradsItCannotRead) {
  Grads g(1.0f);
  g.b.grad = Tensor();
  EXPECT_EQ(HasNonFiniteGrad(g.list()).status(), absl::InvalidArgumentError("parameter \"b\" has no grad tensor"));
  g.b.grad = Tensor::Zeros({1, 1}, DType::kF16);
  EXPECT_EQ(GlobalGradNorm(g.list(), 1.0f).status(),
            absl::InvalidArgumentError("parameter \"b\" grad must be a host f32 tensor, got cpu f16"));
}

}  // namespace
}  // namespace ringmaster::engine::optim
