#include "engine/optim/cpu_update.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

// Kernel tests against values computed by hand (written out in the comments)
// and against straightforward loops.

namespace ringmaster::engine::optim {
namespace {

constexpr double kTol = 1e-6;

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol = kTol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(SumSquaresTest, MatchesFp64LoopForAllTailLengths) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3, 3);
  for (int n : {0, 1, 7, 8, 9, 16, 31, 1000}) {
    std::vector<float> x(n);
    double want = 0;
    for (float& e : x) {
      e = u(rng);
      want += static_cast<double>(e) * e;
    }
    EXPECT_NEAR(SumSquares(x.data(), n), want, 1e-12 * std::max(1.0, want)) << "n = " << n;
  }
  const float three_four[] = {3.0f, 4.0f};
  EXPECT_EQ(SumSquares(three_four, 2), 25.0);
}

TEST(AllFiniteTest, FindsInfAndNanAnywhere) {
  std::vector<float> x(19, 1.5f);
  EXPECT_TRUE(AllFinite(x.data(), x.size()));
  x[3] = std::numeric_limits<float>::max();  // large but finite
  EXPECT_TRUE(AllFinite(x.data(), x.size()));
  for (size_t pos : {0u, 7u, 8u, 18u}) {
    for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> y = x;
      y[pos] = bad;
      EXPECT_FALSE(AllFinite(y.data(), y.size())) << "position " << pos << " value " << bad;
    }
  }
}

// w = [1, -2, 0.5], g = [0.5, 0.25, -1] in the SGD tests.
TEST(SgdUpdateTest, PlainStepIsWMinusLrG) {
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, g = {0.5f, 0.25f, -1.0f};
  SgdUpdate(w.data(), g.data(), nullptr, 3, SgdArgs{0.1f, 0.0f, 0.0f, false, 1.0f});
  ExpectNear(w, {0.95, -2.025, 0.6});
}

TEST(SgdUpdateTest, MomentumWithL2WeightDecayTwoSteps) {
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, g = {0.5f, 0.25f, -1.0f}, buf(3, 0.0f);
  const SgdArgs args{0.1f, 0.9f, 0.1f, false, 1.0f};
  // Step 1: g' = g + 0.1 w = [0.6, 0.05, -0.95] = buf; w -= 0.1 buf.
  SgdUpdate(w.data(), g.data(), buf.data(), 3, args);
  ExpectNear(buf, {0.6, 0.05, -0.95});
  ExpectNear(w, {0.94, -2.005, 0.595});
  // Step 2: g' = g + 0.1 w = [0.594, 0.0495, -0.9405]; buf = 0.9 buf + g'.
  SgdUpdate(w.data(), g.data(), buf.data(), 3, args);
  ExpectNear(buf, {1.134, 0.0945, -1.7955});
  ExpectNear(w, {0.8266, -2.01445, 0.77455});
}

TEST(SgdUpdateTest, NesterovUsesGPlusMomentumTimesBuffer) {
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, g = {0.5f, 0.25f, -1.0f}, buf(3, 0.0f);
  const SgdArgs args{0.1f, 0.9f, 0.0f, true, 1.0f};
  // Step 1: buf = g; d = g + 0.9 buf = 1.9 g.
  SgdUpdate(w.data(), g.data(), buf.data(), 3, args);
  ExpectNear(w, {0.905, -2.0475, 0.69});
  // Step 2: buf = 0.9 g + g = 1.9 g; d = g + 0.9 * 1.9 g = 2.71 g.
  SgdUpdate(w.data(), g.data(), buf.data(), 3, args);
  ExpectNear(buf, {0.95, 0.475, -1.9});
  ExpectNear(w, {0.7695, -2.11525, 0.961});
}

// w = [1, -2, 0.5], g = [0.5, 0.25, -1], lr 0.01, wd 0.1: w *= 0.999, then
// m_hat = g and v_hat = g^2, so w -= 0.01 * g / (|g| + 1e-8) ~= 0.01 sign(g).
TEST(AdamWUpdateTest, FirstStepIsBiasCorrectedSignStepWithDecoupledDecay) {
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, g = {0.5f, 0.25f, -1.0f}, m(3, 0.0f), v(3, 0.0f);
  AdamWUpdate(w.data(), g.data(), m.data(), v.data(), 3, AdamWArgs{0.01f, 0.9, 0.999, 1e-8f, 0.1f, 1, 1.0f});
  ExpectNear(w, {0.989, -2.008, 0.5095});
  // m = 0.1 g, v = 0.001 g^2, with 1 - beta rounded to fp32 once (as PyTorch).
  ExpectNear(m, {0.05, 0.025, -0.1}, 1e-8);
  ExpectNear(v, {0.00025, 0.0000625, 0.001}, 1e-10);
}

// With a constant gradient the bias-corrected moments equal g and g^2 at
// every step, so each step moves w by lr * g / (|g| + eps). Without the bias
// correction step 1 would move by lr * 0.1 / sqrt(0.001) = 3.16 lr.
TEST(AdamWUpdateTest, BiasCorrectionMakesConstantGradientStepsEqual) {
  std::vector<float> w = {0.0f, 0.0f}, g = {2.0f, -0.125f}, m(2, 0.0f), v(2, 0.0f);
  for (int step = 1; step <= 10; ++step) {
    AdamWUpdate(w.data(), g.data(), m.data(), v.data(), 2, AdamWArgs{0.01f, 0.9, 0.999, 1e-8f, 0.0f, step, 1.0f});
    ExpectNear(w, {-0.01 * step, 0.01 * step}, 1e-6);
  }
}

TEST(LarsTest, TrustRatioFormulaAndZeroNorms) {
  // ||w|| = 5, ||g|| = 1, eta 0.001, wd 0.01: 0.001 * 5 / (1 + 0.05).
  EXPECT_NEAR(LarsTrustRatio(5.0, 1.0, 0.001f, 0.01f), 0.0047619047619047615, 1e-9);
  EXPECT_EQ(LarsTrustRatio(0.0, 1.0, 0.001f, 0.01f), 1.0f);
  EXPECT_EQ(LarsTrustRatio(5.0, 0.0, 0.001f, 0.01f), 1.0f);
}

TEST(LarsTest, OneStepByHand) {
  // w = [3, 4], g = [0.8, -0.6]: trust 0.0047619..., d = trust (g + 0.01 w) =
  // trust [0.83, -0.56]; buf = d; w -= 1.0 * buf.
  std::vector<float> w = {3.0f, 4.0f}, g = {0.8f, -0.6f}, buf(2, 0.0f);
  const float trust =
      LarsTrustRatio(std::sqrt(SumSquares(w.data(), 2)), std::sqrt(SumSquares(g.data(), 2)), 0.001f, 0.01f);
  LarsUpdate(w.data(), g.data(), buf.data(), 2, LarsArgs{1.0f, 0.9f, 0.01f, trust, 1.0f});
  ExpectNear(w, {2.996047619047619, 4.002666666666666});
  ExpectNear(buf, {0.0047619047619 * 0.83, -0.0047619047619 * 0.56}, 1e-9);
}

TEST(LambTest, OneStepByHand) {
  // w = [3, 4], g = [0.8, -0.6], wd 0.01, eps 1e-6, lr 0.1, step 1:
  // r = g / (|g| + 1e-6), u = r + 0.01 w, trust = 5 / ||u|| = 3.551109293...,
  // w -= 0.1 trust u.
  std::vector<float> w = {3.0f, 4.0f}, g = {0.8f, -0.6f}, m(2, 0.0f), v(2, 0.0f);
  LambArgs args{0.1f, 0.9, 0.999, 1e-6f, 0.01f, 1, 1.0f, 1.0f};
  const double u_sq = LambUpdateSumSquares(w.data(), g.data(), m.data(), v.data(), 2, args);
  EXPECT_EQ(m[0], 0.0f) << "the first pass must not write";
  args.trust_ratio = LambTrustRatio(std::sqrt(SumSquares(w.data(), 2)), std::sqrt(u_sq));
  EXPECT_NEAR(args.trust_ratio, 3.55110929330493, 1e-5);
  LambUpdate(w.data(), g.data(), m.data(), v.data(), 2, args);
  ExpectNear(w, {2.634236186677699, 4.340905900306711}, 2e-6);
  EXPECT_EQ(LambTrustRatio(0.0, 2.0), 1.0f);
  EXPECT_EQ(LambTrustRatio(2.0, 0.0), 1.0f);
}

// Grads stored times 65536 with grad_scale 1/65536 give bitwise the same
// update as the true grads (both factors are powers of two).
TEST(GradScaleTest, ScaledGradsWithInverseScaleEqualTrueGrads) {
  constexpr int n = 21;
  constexpr float kScale = 65536.0f;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> w0(n), g(n), g_scaled(n);
  for (int i = 0; i < n; ++i) {
    w0[i] = u(rng);
    g[i] = u(rng);
    g_scaled[i] = g[i] * kScale;
  }
  auto run = [&](const std::vector<float>& grad, float grad_scale, int kind) {
    std::vector<float> w = w0, a(n, 0.1f), b(n, 0.2f);
    switch (kind) {
      case 0:
        SgdUpdate(w.data(), grad.data(), a.data(), n, SgdArgs{0.1f, 0.9f, 0.01f, true, grad_scale});
        break;
      case 1:
        AdamWUpdate(w.data(), grad.data(), a.data(), b.data(), n,
                    AdamWArgs{0.1f, 0.9, 0.99, 1e-8f, 0.1f, 3, grad_scale});
        break;
      case 2:
        LarsUpdate(w.data(), grad.data(), a.data(), n, LarsArgs{0.1f, 0.9f, 0.01f, 0.5f, grad_scale});
        break;
      case 3:
        LambUpdate(w.data(), grad.data(), a.data(), b.data(), n,
                   LambArgs{0.1f, 0.9, 0.99, 1e-6f, 0.01f, 3, 0.7f, grad_scale});
        break;
    }
    w.insert(w.end(), a.begin(), a.end());
    w.insert(w.end(), b.begin(), b.end());
    return w;
  };
  for (int kind = 0; kind < 4; ++kind) {
    EXPECT_EQ(run(g_scaled, 1.0f / kScale, kind), run(g, 1.0f, kind)) << "kernel " << kind;
  }
}

TEST(ScaleInPlaceTest, MultipliesEveryElement) {
  std::vector<float> x = {1, -2, 3, 4, 5, 6, 7, 8, 9};
  ScaleInPlace(x.data(), x.size(), 0.5f);
  ExpectNear(x, {0.5, -1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}, 0);
}

}  // namespace
}  // namespace ringmaster::engine::optim
