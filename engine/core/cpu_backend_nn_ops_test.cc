// CpuBackend layer ops (conv, pooling, norms, attention, activations,
// dropout, embedding) against the naive references in reference_ops.

#include <cmath>

#include "engine/core/cpu_backend.h"
#include "engine/core/reference_ops.h"
#include "engine/core/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

using testing::BitwiseEqual;
using testing::MaxRelDiff;
using testing::RandomTensor;

class ConvTest : public ::testing::TestWithParam<std::tuple<int, ref::ConvShape, bool>> {};

TEST_P(ConvTest, ForwardAndBackwardMatchReference) {
  const auto [threads, s, with_bias] = GetParam();
  CpuBackend be({threads, DType::kF32});
  Tensor x = RandomTensor({s.n, s.c, s.h, s.w}, 1);
  Tensor w = RandomTensor({s.o, s.c, s.g.kernel_h, s.g.kernel_w}, 2);
  Tensor b = RandomTensor({s.o}, 3);
  Tensor y = Tensor::Empty({s.n, s.o, s.oh(), s.ow()});
  be.Conv2dForward(x, w, with_bias ? &b : nullptr, s.g, y);
  std::vector<float> want = ref::Conv2d(s, x.ToVector(), w.ToVector(), with_bias ? b.ToVector() : std::vector<float>{});
  EXPECT_LT(MaxRelDiff(y.ToVector(), want), 1e-5);

  Tensor dy = RandomTensor(y.shape(), 4);
  Tensor dx = Tensor::Empty(x.shape());
  Tensor dw = RandomTensor(w.shape(), 5);  // accumulates
  Tensor db = RandomTensor(b.shape(), 6);
  std::vector<float> dw0 = dw.ToVector(), db0 = db.ToVector();
  be.Conv2dBackward(x, w, dy, s.g, &dx, dw, with_bias ? &db : nullptr);
  std::vector<float> rdx, rdw, rdb;
  ref::Conv2dBackward(s, x.ToVector(), w.ToVector(), dy.ToVector(), &rdx, &rdw, &rdb);
  for (size_t i = 0; i < rdw.size(); ++i) rdw[i] += dw0[i];
  for (size_t i = 0; i < rdb.size(); ++i) rdb[i] += db0[i];
  EXPECT_LT(MaxRelDiff(dx.ToVector(), rdx), 1e-5);
  EXPECT_LT(MaxRelDiff(dw.ToVector(), rdw), 1e-5);
  EXPECT_LT(MaxRelDiff(db.ToVector(), with_bias ? rdb : db0), 1e-5);
}

Conv2dGeometry Geo(int64_t k, int64_t s, int64_t p) {
  Conv2dGeometry g;
  g.kernel_h = g.kernel_w = k;
  g.stride_h = g.stride_w = s;
  g.pad_h = g.pad_w = p;
  return g;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvTest,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(ref::ConvShape{3, 2, 7, 6, 4, Geo(3, 1, 1)},
                                                              ref::ConvShape{2, 3, 9, 9, 5, Geo(3, 2, 0)},
                                                              ref::ConvShape{5, 1, 8, 8, 3, Geo(5, 1, 2)},
                                                              ref::ConvShape{1, 4, 5, 5, 2, Geo(1, 1, 0)}),
                                            ::testing::Bool()));

TEST(CpuNnOpsTest, MaxPoolMatchesReference) {
  CpuBackend be({2, DType::kF32});
  for (auto [k, s] : {std::pair<int64_t, int64_t>{2, 2}, {3, 2}, {3, 1}}) {
    const int64_t n = 3, c = 4, h = 9, w = 8, oh = (h - k) / s + 1, ow = (w - k) / s + 1;
    Tensor x = RandomTensor({n, c, h, w}, 7);
    Tensor y = Tensor::Empty({n, c, oh, ow});
    be.MaxPool2dForward(x, k, s, y);
    EXPECT_EQ(y.ToVector(), ref::MaxPool(n, c, h, w, k, s, x.ToVector()));
    Tensor dy = RandomTensor(y.shape(), 8), dx = Tensor::Empty(x.shape());
    be.MaxPool2dBackward(x, dy, k, s, dx);
    EXPECT_LT(MaxRelDiff(dx.ToVector(), ref::MaxPoolBackward(n, c, h, w, k, s, x.ToVector(), dy.ToVector())), 1e-6);
  }
}

TEST(CpuNnOpsTest, BatchNormTrainEvalBackward) {
  CpuBackend be({2, DType::kF32});
  const int64_t n = 4, c = 3, h = 5, w = 6;
  const float eps = 1e-5f, momentum = 0.1f;
  Tensor x = RandomTensor({n, c, h, w}, 9, -2.0f, 3.0f);
  Tensor gamma = RandomTensor({c}, 10, 0.5f, 1.5f), beta = RandomTensor({c}, 11);
  Tensor rm = Tensor::Zeros({c}), rv = Tensor::Zeros({c});
  be.Fill(rv, 1.0f);
  Tensor y = Tensor::Empty(x.shape()), sm = Tensor::Empty({c}), si = Tensor::Empty({c});
  be.BatchNorm2dForwardTrain(x, gamma, beta, momentum, eps, rm, rv, y, sm, si);
  std::vector<float> ry, rmean, rvar;
  ref::BatchNorm(n, c, h * w, x.ToVector(), gamma.ToVector(), beta.ToVector(), eps, &ry, &rmean, &rvar);
  EXPECT_LT(MaxRelDiff(y.ToVector(), ry), 1e-5);
  const double unbias = static_cast<double>(n * h * w) / (n * h * w - 1);
  for (int64_t ch = 0; ch < c; ++ch) {
    EXPECT_NEAR(rm.ToVector()[ch], momentum * rmean[ch], 1e-6);
    EXPECT_NEAR(rv.ToVector()[ch], (1 - momentum) + momentum * rvar[ch] * unbias, 1e-5);
  }
  // Eval with running stats equal to the batch statistics reproduces training output.
  Tensor em = Tensor::FromVector({c}, rmean), ev = Tensor::FromVector({c}, rvar), ey = Tensor::Empty(x.shape());
  be.BatchNorm2dForwardEval(x, gamma, beta, em, ev, eps, ey);
  EXPECT_LT(MaxRelDiff(ey.ToVector(), ry), 1e-5);

  Tensor dy = RandomTensor(x.shape(), 12), dx = Tensor::Empty(x.shape());
  Tensor dg = Tensor::Zeros({c}), dbt = Tensor::Zeros({c});
  be.BatchNorm2dBackward(x, dy, gamma, sm, si, dx, dg, dbt);
  std::vector<float> rdx, rdg, rdb;
  ref::BatchNormBackward(n, c, h * w, x.ToVector(), gamma.ToVector(), dy.ToVector(), eps, &rdx, &rdg, &rdb);
  EXPECT_LT(MaxRelDiff(dx.ToVector(), rdx), 1e-4);
  EXPECT_LT(MaxRelDiff(dg.ToVector(), rdg), 1e-5);
  EXPECT_LT(MaxRelDiff(dbt.ToVector(), rdb), 1e-5);
}

TEST(CpuNnOpsTest, LayerNormForwardBackward) {
  for (int threads : {1, 2}) {
    CpuBackend be({threads, DType::kF32});
    const int64_t rows = 70, c = 24;
    Tensor x = RandomTensor({2, 35, c}, 13, -2.0f, 2.0f);
    Tensor gamma = RandomTensor({c}, 14), beta = RandomTensor({c}, 15);
    Tensor y = Tensor::Empty(x.shape()), mean = Tensor::Empty({rows}), rstd = Tensor::Empty({rows});
    be.LayerNormForward(x, gamma, beta, 1e-5f, y, mean, rstd);
    std::vector<float> ry;
    ref::LayerNorm(rows, c, x.ToVector(), gamma.ToVector(), beta.ToVector(), 1e-5f, &ry);
    EXPECT_LT(MaxRelDiff(y.ToVector(), ry), 1e-5);
    Tensor dy = RandomTensor(x.shape(), 16), dx = Tensor::Empty(x.shape());
    Tensor dg = Tensor::Zeros({c}), db = Tensor::Zeros({c});
    be.LayerNormBackward(x, dy, gamma, mean, rstd, dx, dg, db);
    std::vector<float> rdx, rdg, rdb;
    ref::LayerNormBackward(rows, c, x.ToVector(), gamma.ToVector(), dy.ToVector(), 1e-5f, &rdx, &rdg, &rdb);
    EXPECT_LT(MaxRelDiff(dx.ToVector(), rdx), 1e-4);
    EXPECT_LT(MaxRelDiff(dg.ToVector(), rdg), 1e-5);
    EXPECT_LT(MaxRelDiff(db.ToVector(), rdb), 1e-5);
  }
}

TEST(CpuNnOpsTest, AttentionForwardBackward) {
  CpuBackend be({2, DType::kF32});
  const int64_t b = 2, t = 7, c = 12, nh = 3;
  Tensor qkv = RandomTensor({b, t, 3 * c}, 17, -2.0f, 2.0f);
  ASSERT_EQ(be.AttentionSavedShape(b, nh, t, c / nh), (Shape{b, nh, t, t}));
  Tensor att = Tensor::Empty({b, nh, t, t}), out = Tensor::Empty({b, t, c});
  be.AttentionForward(qkv, nh, att, out);
  EXPECT_LT(MaxRelDiff(out.ToVector(), ref::Attention(b, t, c, nh, qkv.ToVector())), 1e-5);
  std::vector<float> p = att.ToVector();
  for (int64_t i = 0; i < t; ++i) {
    double row = 0.0;
    for (int64_t j = 0; j < t; ++j) {
      if (j > i) {
        EXPECT_EQ(p[i * t + j], 0.0f);
      }
      row += p[i * t + j];
    }
    EXPECT_NEAR(row, 1.0, 1e-5);
  }
  Tensor dout = RandomTensor(out.shape(), 18), dqkv = Tensor::Empty(qkv.shape());
  be.AttentionBackward(qkv, att, out, dout, nh, dqkv);
  EXPECT_LT(MaxRelDiff(dqkv.ToVector(), ref::AttentionBackward(b, t, c, nh, qkv.ToVector(), dout.ToVector())), 1e-5);
}

TEST(CpuNnOpsTest, ReluAndGelu) {
  CpuBackend be({2, DType::kF32});
  Tensor x = RandomTensor({500}, 19, -4.0f, 4.0f), y = Tensor::Empty({500});
  Tensor dy = RandomTensor({500}, 20), dx = Tensor::Empty({500});
  std::vector<float> xv = x.ToVector(), dyv = dy.ToVector();
  be.ReluForward(x, y);
  be.ReluBackward(y, dy, dx);
  for (int i = 0; i < 500; ++i) {
    ASSERT_EQ(y.ToVector()[i], std::max(0.0f, xv[i]));
    ASSERT_EQ(dx.ToVector()[i], xv[i] > 0 ? dyv[i] : 0.0f);
  }
  be.GeluForward(x, y);
  be.GeluBackward(x, dy, dx);
  std::vector<float> yv = y.ToVector(), dxv = dx.ToVector();
  for (int i = 0; i < 500; ++i) {
    ASSERT_NEAR(yv[i], ref::Gelu(xv[i]), 1e-5);
    ASSERT_NEAR(dxv[i], ref::GeluGrad(xv[i]) * dyv[i], 1e-4);
  }
}

TEST(CpuNnOpsTest, DropoutMaskIsReproducibleAndHasRateP) {
  const float p = 0.3f;
  Tensor x = RandomTensor({20000}, 21);
  Tensor m1 = Tensor::Empty({20000}), y1 = Tensor::Empty({20000});
  Tensor m2 = Tensor::Empty({20000}), y2 = Tensor::Empty({20000});
  CpuBackend be1({1, DType::kF32}), be2({2, DType::kF32});
  be1.DropoutForward(x, p, 42, m1, y1);
  be2.DropoutForward(x, p, 42, m2, y2);
  EXPECT_TRUE(BitwiseEqual(m1, m2));  // independent of the thread count
  EXPECT_TRUE(BitwiseEqual(y1, y2));
  int dropped = 0;
  for (float m : m1.ToVector()) {
    ASSERT_TRUE(m == 0.0f || std::fabs(m - 1.0f / (1.0f - p)) < 1e-6f);
    dropped += m == 0.0f;
  }
  EXPECT_NEAR(dropped / 20000.0, p, 0.015);
  be2.DropoutForward(x, p, 43, m2, y2);
  EXPECT_FALSE(BitwiseEqual(m1, m2));  // another key, another mask
  Tensor dy = RandomTensor({20000}, 22), dx = Tensor::Empty({20000});
  be1.DropoutBackward(dy, m1, dx);
  EXPECT_EQ(dx.ToVector()[5], dy.ToVector()[5] * m1.ToVector()[5]);
}

TEST(CpuNnOpsTest, EmbeddingForwardAndScatterAdd) {
  CpuBackend be({2, DType::kF32});
  const int64_t b = 3, t = 4, v = 5, c = 40;
  std::vector<int32_t> tok = {0, 1, 1, 4, 2, 2, 2, 0, 4, 3, 1, 1};
  Tensor tokens = Tensor::FromInts({b, t}, tok);
  Tensor wte = RandomTensor({v, c}, 23), wpe = RandomTensor({6, c}, 24), out = Tensor::Empty({b, t, c});
  be.EmbeddingForward(tokens, wte, wpe, out);
  std::vector<float> te = wte.ToVector(), pe = wpe.ToVector(), o = out.ToVector();
  for (int64_t i = 0; i < b * t; ++i)
    for (int64_t j = 0; j < c; ++j) ASSERT_EQ(o[i * c + j], te[tok[i] * c + j] + pe[(i % t) * c + j]);
  Tensor dout = RandomTensor(out.shape(), 25);
  Tensor dwte = Tensor::Zeros({v, c}), dwpe = Tensor::Zeros({6, c});
  be.EmbeddingBackward(tokens, dout, dwte, dwpe);
  std::vector<float> g = dout.ToVector(), want_te(v * c, 0.0f), want_pe(6 * c, 0.0f);
  for (int64_t i = 0; i < b * t; ++i)
    for (int64_t j = 0; j < c; ++j) {
      want_te[tok[i] * c + j] += g[i * c + j];
      want_pe[(i % t) * c + j] += g[i * c + j];
    }
  EXPECT_LT(MaxRelDiff(dwte.ToVector(), want_te), 1e-6);
  EXPECT_LT(MaxRelDiff(dwpe.ToVector(), want_pe), 1e-6);
}

TEST(CpuNnOpsTest, Bf16ConvOutputIsRoundedAndClose) {
  ref::ConvShape s{4, 8, 10, 10, 16, Geo(3, 1, 1)};
  Tensor x = RandomTensor({s.n, s.c, s.h, s.w}, 26), w = RandomTensor({s.o, s.c, 3, 3}, 27);
  CpuBackend f32({2, DType::kF32}), bf16({2, DType::kBF16});
  Tensor y32 = Tensor::Empty({s.n, s.o, s.oh(), s.ow()}), y16 = Tensor::Empty(y32.shape());
  f32.Conv2dForward(x, w, nullptr, s.g, y32);
  bf16.Conv2dForward(x, w, nullptr, s.g, y16);
  for (float v : y16.ToVector()) ASSERT_EQ(v, RoundTo(DType::kBF16, v));
  const double rel = MaxRelDiff(y16.ToVector(), y32.ToVector());
  EXPECT_GT(rel, 0.0);
  EXPECT_LT(rel, 3e-2);  // bf16 operands (8-bit mantissa), K = 72, fp32 accumulation
}

}  // namespace
}  // namespace ringmaster::engine
