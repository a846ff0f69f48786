// CpuBackend: GEMM variants, reductions, elementwise ops, rounding, non-finite
// check and softmax cross-entropy against naive references; determinism.

#include <cmath>
#include <limits>

#include "engine/core/cpu_backend.h"
#include "engine/core/reference_ops.h"
#include "engine/core/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

using testing::BitwiseEqual;
using testing::MaxRelDiff;
using testing::RandomTensor;
using testing::RandomVec;

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  bool bias;
};

class GemmTest : public ::testing::TestWithParam<std::tuple<int, GemmCase>> {};

TEST_P(GemmTest, MatchesReference) {
  const auto [threads, gc] = GetParam();
  CpuBackend be({threads, DType::kF32});
  Tensor a = RandomTensor(gc.ta ? Shape{gc.k, gc.m} : Shape{gc.m, gc.k}, 1);
  Tensor b = RandomTensor(gc.tb ? Shape{gc.n, gc.k} : Shape{gc.k, gc.n}, 2);
  Tensor c = RandomTensor({gc.m, gc.n}, 3);
  Tensor bias = RandomTensor({gc.n}, 4);
  std::vector<float> want = ref::Gemm(gc.ta, gc.tb, gc.m, gc.n, gc.k, gc.alpha, a.ToVector(), b.ToVector(), gc.beta,
                                      c.ToVector(), gc.bias ? bias.ToVector() : std::vector<float>{});
  be.Gemm(gc.ta, gc.tb, gc.alpha, a, b, gc.beta, c, gc.bias ? &bias : nullptr);
  EXPECT_LT(MaxRelDiff(c.ToVector(), want), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, GemmTest,
    ::testing::Combine(::testing::Values(1, 2, 3),
                       ::testing::Values(GemmCase{false, false, 5, 7, 3, 1.0f, 0.0f, false},
                                         GemmCase{true, false, 33, 70, 65, 0.5f, 0.0f, true},
                                         GemmCase{false, true, 64, 128, 100, 1.0f, 1.0f, true},
                                         GemmCase{true, true, 130, 40, 90, 2.0f, 0.5f, false},
                                         GemmCase{false, false, 200, 17, 300, 1.0f, 1.0f, true},
                                         GemmCase{false, true, 1, 300, 1000, 1.0f, 0.0f, true})));

TEST(CpuBackendTest, GemmBatchedMatchesPerBatchReference) {
  CpuBackend be({2, DType::kF32});
  const int64_t batch = 5, m = 9, n = 11, k = 6;
  Tensor a = RandomTensor({batch, k, m}, 5);  // transposed
  Tensor b = RandomTensor({batch, k, n}, 6);
  Tensor c = Tensor::Zeros({batch, m, n});
  be.GemmBatched(true, false, 1.5f, a, b, 0.0f, c);
  std::vector<float> av = a.ToVector(), bv = b.ToVector(), cv = c.ToVector();
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<float> ai(av.begin() + i * k * m, av.begin() + (i + 1) * k * m);
    std::vector<float> bi(bv.begin() + i * k * n, bv.begin() + (i + 1) * k * n);
    std::vector<float> want = ref::Gemm(true, false, m, n, k, 1.5f, ai, bi, 0.0f, {}, {});
    std::vector<float> got(cv.begin() + i * m * n, cv.begin() + (i + 1) * m * n);
    EXPECT_LT(MaxRelDiff(got, want), 1e-5) << "batch " << i;
  }
}

TEST(CpuBackendTest, BiasGradAccumulatesColumnSums) {
  CpuBackend be({2, DType::kF32});
  Tensor dy = RandomTensor({3, 100, 7}, 7);
  Tensor db = RandomTensor({7}, 8);
  std::vector<float> want = db.ToVector();
  std::vector<float> d = dy.ToVector();
  for (int64_t i = 0; i < 300; ++i)
    for (int j = 0; j < 7; ++j) want[j] += d[i * 7 + j];
  be.BiasGrad(dy, db);
  EXPECT_LT(MaxRelDiff(db.ToVector(), want), 1e-5);
}

TEST(CpuBackendTest, ElementwiseOps) {
  CpuBackend be({2, DType::kF32});
  Tensor a = RandomTensor({1000}, 9), b = RandomTensor({1000}, 10), out = Tensor::Empty({1000});
  be.Add(a, b, out);
  std::vector<float> av = a.ToVector(), bv = b.ToVector(), ov = out.ToVector();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(ov[i], av[i] + bv[i]);
  be.Axpy(-2.0f, a, b);
  std::vector<float> bv2 = b.ToVector();
  for (int i = 0; i < 1000; ++i) ASSERT_FLOAT_EQ(bv2[i], bv[i] - 2.0f * av[i]);
  be.Scale(a, 3.0f);
  EXPECT_FLOAT_EQ(a.ToVector()[17], 3.0f * av[17]);
  be.Fill(a, 0.25f);
  for (float x : a.ToVector()) ASSERT_EQ(x, 0.25f);
}

TEST(CpuBackendTest, RoundInPlaceMatchesScalarRounding) {
  CpuBackend be({2, DType::kF32});
  std::vector<float> v = RandomVec(4099, 11, -70000.0f, 70000.0f);
  std::vector<float> extra = {0.0f, -0.0f, 1e-8f, -3e-6f, 6.1e-5f, 65504.0f, 65520.0f, 1e30f,
                              std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 1.0f + 1.0f / 1024, 3.0e-39f};
  v.insert(v.end(), extra.begin(), extra.end());
  for (float& x : RandomVec(1000, 12, -1e-3f, 1e-3f)) v.push_back(x);
  for (DType t : {DType::kF16, DType::kBF16}) {
    Tensor x = Tensor::FromVector({static_cast<int64_t>(v.size())}, v);
    be.RoundInPlace(x, t);
    std::vector<float> got = x.ToVector();
    for (size_t i = 0; i < v.size(); ++i) {
      float want = RoundTo(t, v[i]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[i])) << i;
      } else {
        EXPECT_EQ(got[i], want) << DTypeName(t) << " " << v[i];
      }
    }
  }
}

TEST(CpuBackendTest, ConvertRoundTrips) {
  CpuBackend be({2, DType::kF32});
  Tensor x = RandomTensor({333}, 13, -100.0f, 100.0f);
  for (DType t : {DType::kF16, DType::kBF16}) {
    Tensor h = Tensor::Empty({333}, t), back = Tensor::Empty({333});
    be.Convert(x, h);
    be.Convert(h, back);
    std::vector<float> xv = x.ToVector(), bv = back.ToVector();
    for (int i = 0; i < 333; ++i) ASSERT_EQ(bv[i], RoundTo(t, xv[i]));
  }
}

TEST(CpuBackendTest, NonFiniteCheckFlagsInfAndNan) {
  CpuBackend be({2, DType::kF32});
  Tensor flag = Tensor::Zeros({1});
  Tensor a = RandomTensor({100000}, 14), b = RandomTensor({10}, 15);
  be.NonFiniteCheck({a, b}, flag);
  EXPECT_EQ(flag.ToVector()[0], 0.0f);
  b.f32()[3] = std::numeric_limits<float>::infinity();
  be.NonFiniteCheck({a, b}, flag);
  EXPECT_EQ(flag.ToVector()[0], 1.0f);
  flag.f32()[0] = 0.0f;
  b.f32()[3] = 0.0f;
  a.f32()[99999] = std::numeric_limits<float>::quiet_NaN();
  be.NonFiniteCheck({a, b}, flag);
  EXPECT_EQ(flag.ToVector()[0], 1.0f);
}

TEST(CpuBackendTest, SoftmaxCrossEntropyMatchesReference) {
  CpuBackend be({2, DType::kF32});
  const int64_t m = 37, v = 13;
  Tensor logits = RandomTensor({m, v}, 16, -5.0f, 5.0f);
  std::vector<int32_t> t(m);
  for (int64_t i = 0; i < m; ++i) t[i] = static_cast<int32_t>((i * 7) % v);
  t[3] = -100;
  t[20] = -100;
  Tensor targets = Tensor::FromInts({m}, t);
  Tensor loss = Tensor::Empty({1}), dlogits = Tensor::Empty({m, v});
  be.SoftmaxCrossEntropy(logits, targets, -100, 1.0f, loss, dlogits);
  std::vector<float> want_d;
  float want = ref::SoftmaxCrossEntropy(m, v, logits.ToVector(), t, -100, &want_d);
  EXPECT_NEAR(loss.ToVector()[0], want, 1e-5 * std::fabs(want));
  EXPECT_LT(MaxRelDiff(dlogits.ToVector(), want_d), 1e-5);
  for (int j = 0; j < v; ++j) EXPECT_EQ(dlogits.ToVector()[3 * v + j], 0.0f);
  // grad_scale multiplies the gradient, not the loss.
  Tensor d2 = Tensor::Empty({m, v});
  be.SoftmaxCrossEntropy(logits, targets, -100, 1024.0f, loss, d2);
  EXPECT_NEAR(loss.ToVector()[0], want, 1e-5 * std::fabs(want));
  EXPECT_FLOAT_EQ(d2.ToVector()[5], 1024.0f * dlogits.ToVector()[5]);
}

TEST(CpuBackendTest, SoftmaxCrossEntropyAllIgnoredGivesZero) {
  CpuBackend be({1, DType::kF32});
  Tensor logits = RandomTensor({2, 3}, 17);
  Tensor targets = Tensor::FromInts({2}, {-1, -1});
  Tensor loss = Tensor::Empty({1}), d = Tensor::Empty({2, 3});
  be.SoftmaxCrossEntropy(logits, targets, -1, 1.0f, loss, d);
  EXPECT_EQ(loss.ToVector()[0], 0.0f);
  for (float x : d.ToVector()) EXPECT_EQ(x, 0.0f);
}

TEST(CpuBackendTest, GemmIsBitwiseReproducibleForSameThreadCount) {
  Tensor a = RandomTensor({96, 300}, 18), b = RandomTensor({300, 200}, 19);
  CpuBackend be1({2, DType::kF32}), be2({2, DType::kF32});
  Tensor c1 = Tensor::Empty({96, 200}), c2 = Tensor::Empty({96, 200});
  be1.Gemm(false, false, 1.0f, a, b, 0.0f, c1);
  for (int run = 0; run < 5; ++run) {
    be2.Gemm(false, false, 1.0f, a, b, 0.0f, c2);
    ASSERT_TRUE(BitwiseEqual(c1, c2)) << "run " << run;
  }
}

TEST(CpuBackendTest, ReducedPrecisionGemmIsRoundedAndClose) {
  Tensor a = RandomTensor({64, 128}, 20), b = RandomTensor({128, 32}, 21);
  CpuBackend f32({2, DType::kF32});
  Tensor want = Tensor::Empty({64, 32});
  f32.Gemm(false, false, 1.0f, a, b, 0.0f, want);
  // Relative error bounds: operand rounding (2^-8 bf16, 2^-11 f16) over K = 128
  // random-sign terms stays well below these.
  for (auto [dtype, bound] : {std::pair{DType::kBF16, 3e-2}, std::pair{DType::kF16, 4e-3}}) {
    CpuBackend be({2, dtype});
    Tensor got = Tensor::Empty({64, 32});
    be.Gemm(false, false, 1.0f, a, b, 0.0f, got);
    std::vector<float> g = got.ToVector();
    for (float x : g) ASSERT_EQ(x, RoundTo(dtype, x)) << "output not rounded to " << DTypeName(dtype);
    double rel = MaxRelDiff(g, want.ToVector());
    EXPECT_GT(rel, 0.0) << DTypeName(dtype) << " gave exactly the f32 result";
    EXPECT_LT(rel, bound) << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace ringmaster::engine
