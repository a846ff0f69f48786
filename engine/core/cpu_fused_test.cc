// CpuBackend's fused ops equal, bit for bit, the unfused sequences backend.h
// names (the GPT model switched to them; its CPU results must not change), in
// every compute dtype, on odd shapes, with accumulating parameter gradients
// and with dx updated in place.

#include <tuple>

#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

using testing::BitwiseEqual;
using testing::RandomTensor;

Tensor Clone(const Tensor& t) { return Tensor::FromVector(t.shape(), t.ToVector()); }

class CpuFusedTest : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  CpuFusedTest() : be_({std::get<1>(GetParam()), std::get<0>(GetParam())}) {}
  Tensor Rand(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    Tensor t = RandomTensor(shape, seed, lo, hi);
    be_.RoundInPlace(t, be_.compute_dtype());
    return t;
  }
  CpuBackend be_;
};

TEST_P(CpuFusedTest, LinearGeluForwardIsGemmWithBiasThenGelu) {
  const int64_t b = 3, t = 7, k = 29, n = 53;
  Tensor x = Rand({b, t, k}, 1), w = Rand({n, k}, 2), bias = Rand({n}, 3);
  Tensor pre = Tensor::Empty({b, t, n}), y = Tensor::Empty({b, t, n});
  be_.LinearGeluForward(x, w, bias, pre, y);
  Tensor pre_want = Tensor::Empty({b, t, n}), y_want = Tensor::Empty({b, t, n});
  be_.Gemm(false, true, 1.0f, x, w, 0.0f, pre_want, &bias);
  be_.GeluForward(pre_want, y_want);
  EXPECT_TRUE(BitwiseEqual(pre, pre_want));
  EXPECT_TRUE(BitwiseEqual(y, y_want));
  // Not a copy of the input: GELU moved the values.
  EXPECT_FALSE(BitwiseEqual(y, pre));
}

TEST_P(CpuFusedTest, AddLayerNormForwardIsAddThenLayerNorm) {
  const int64_t rows = 11, c = 37;
  Tensor a = Rand({rows, c}, 10, -2.0f, 2.0f), b = Rand({rows, c}, 11), gamma = Rand({c}, 12), beta = Rand({c}, 13);
  Tensor sum = Tensor::Empty({rows, c}), y = Tensor::Empty({rows, c});
  Tensor mean = Tensor::Empty({rows}), rstd = Tensor::Empty({rows});
  be_.AddLayerNormForward(a, b, gamma, beta, 1e-5f, sum, y, mean, rstd);
  Tensor sum_want = Tensor::Empty({rows, c}), y_want = Tensor::Empty({rows, c});
  Tensor mean_want = Tensor::Empty({rows}), rstd_want = Tensor::Empty({rows});
  be_.Add(a, b, sum_want);
  be_.LayerNormForward(sum_want, gamma, beta, 1e-5f, y_want, mean_want, rstd_want);
  EXPECT_TRUE(BitwiseEqual(sum, sum_want));
  EXPECT_TRUE(BitwiseEqual(y, y_want));
  EXPECT_TRUE(BitwiseEqual(mean, mean_want));
  EXPECT_TRUE(BitwiseEqual(rstd, rstd_want));
}

TEST_P(CpuFusedTest, AddLayerNormBackwardIsLayerNormBackwardThenAdd) {
  const int64_t rows = 45, c = 37;  // more than one 32-row block of parameter-gradient partials
  Tensor x = Rand({rows, c}, 20, -2.0f, 2.0f), gamma = Rand({c}, 21), beta = Rand({c}, 22);
  Tensor y = Tensor::Empty({rows, c}), mean = Tensor::Empty({rows}), rstd = Tensor::Empty({rows});
  be_.LayerNormForward(x, gamma, beta, 1e-5f, y, mean, rstd);
  Tensor dy = Rand({rows, c}, 23), residual = Rand({rows, c}, 24);
  Tensor dgamma0 = Rand({c}, 25), dbeta0 = Rand({c}, 26);

  Tensor ln_dx = Tensor::Empty({rows, c}), dx_want = Tensor::Empty({rows, c});
  Tensor dgamma_want = Clone(dgamma0), dbeta_want = Clone(dbeta0);
  be_.LayerNormBackward(x, dy, gamma, mean, rstd, ln_dx, dgamma_want, dbeta_want);
  be_.Add(residual, ln_dx, dx_want);

  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "dx is residual" : "dx apart");
    Tensor res = Clone(residual);
    Tensor dx = in_place ? res : Tensor::Empty({rows, c});
    Tensor dgamma = Clone(dgamma0), dbeta = Clone(dbeta0);
    be_.AddLayerNormBackward(x, dy, gamma, mean, rstd, res, dx, dgamma, dbeta);
    EXPECT_TRUE(BitwiseEqual(dx, dx_want));
    EXPECT_TRUE(BitwiseEqual(dgamma, dgamma_want));
    EXPECT_TRUE(BitwiseEqual(dbeta, dbeta_want));
  }
}

INSTANTIATE_TEST_SUITE_P(DTypesAndThreads, CpuFusedTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                                            ::testing::Values(1, 2)));

}  // namespace
}  // namespace ringmaster::engine
