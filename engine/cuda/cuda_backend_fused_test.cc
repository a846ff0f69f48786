// CudaBackend's fused ops (LinearGeluForward, AddLayerNormForward,
// AddLayerNormBackward) against the CPU twin, which runs the unfused ops.
// Shapes: sizes that are not multiples of 8/16 (LinearGelu's N % 8 != 0 takes
// the unfused fallback) and GPT-2 small's (M = B*T, C = 768, 4C = 3072).
// And a GPT block that calls them, against the same block on the CPU.
// Activations in the activation dtype, weights and biases of the GEMMs as
// their operand copies (16-bit in 16-bit modes), norm parameters f32.
// Tolerances: cuda_backend_test_util.h. In fp32 the GELU epilogue's formula is
// checked too: the erf GELU differs from our tanh one by up to 4e-4.

#include <algorithm>
#include <string>

#include "engine/cuda/cuda_backend_test_util.h"
#include "engine/nn/gpt.h"
#include "engine/nn/layer.h"

namespace ringmaster::engine::testing {
namespace {

struct GemmShape {
  int64_t m, k, n;
};

TEST_P(CudaBackendTest, LinearGeluForwardMatchesCpuTwin) {
  // {37, 29, 53}: fallback (N % 8); {45, 40, 72}: odd M, epilogue; GPT-2's c_fc at B*T = 4*64.
  const GemmShape shapes[] = {{37, 29, 53}, {45, 40, 72}, {3, 17, 24}, {256, 768, 3072}};
  uint64_t seed = 100;
  for (const GemmShape& s : shapes) {
    Tensor x = Rand({s.m, s.k}, ++seed), w = Rand({s.n, s.k}, ++seed, -0.1f, 0.1f), b = Rand({s.n}, ++seed);
    Tensor pre = PoisonedAct({s.m, s.n}), y = PoisonedAct({s.m, s.n});
    Tensor preh = Tensor::Empty({s.m, s.n}), yh = Tensor::Empty({s.m, s.n});
    gpu_->LinearGeluForward(UpAct(x), UpOperand(w), UpOperand(b), pre, y);
    cpu_->LinearGeluForward(x, w, b, preh, yh);
    SCOPED_TRACE(::testing::Message() << "M " << s.m << " K " << s.k << " N " << s.n);
    ExpectClose("LinearGelu pre", pre, preh);
    ExpectClose("LinearGelu y", y, yh);
  }
}

TEST_P(CudaBackendTest, LinearGeluForwardOnRank3Input) {
  const int64_t b = 2, t = 13, k = 24, n = 32;
  Tensor x = Rand({b, t, k}, 120), w = Rand({n, k}, 121, -0.2f, 0.2f), bias = Rand({n}, 122);
  Tensor pre = PoisonedAct({b, t, n}), y = PoisonedAct({b, t, n});
  Tensor preh = Tensor::Empty({b, t, n}), yh = Tensor::Empty({b, t, n});
  gpu_->LinearGeluForward(UpAct(x), UpOperand(w), UpOperand(bias), pre, y);
  cpu_->LinearGeluForward(x, w, bias, preh, yh);
  ExpectClose("LinearGelu pre", pre, preh);
  ExpectClose("LinearGelu y", y, yh);
}

struct RowsC {
  int64_t rows, c;
};

TEST_P(CudaBackendTest, AddLayerNormForwardMatchesCpuTwin) {
  const RowsC shapes[] = {{7, 37}, {33, 100}, {256, 768}};
  uint64_t seed = 200;
  for (const RowsC& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "rows " << s.rows << " C " << s.c);
    Tensor a = Rand({s.rows, s.c}, ++seed, -2.0f, 2.0f), b = Rand({s.rows, s.c}, ++seed);
    Tensor gamma = Rand({s.c}, ++seed), beta = Rand({s.c}, ++seed);
    Tensor sum = PoisonedAct({s.rows, s.c}), y = PoisonedAct({s.rows, s.c});
    Tensor mean = Poisoned({s.rows}), rstd = Poisoned({s.rows});
    Tensor sumh = Tensor::Empty({s.rows, s.c}), yh = Tensor::Empty({s.rows, s.c});
    Tensor mh = Tensor::Empty({s.rows}), rh = Tensor::Empty({s.rows});
    gpu_->AddLayerNormForward(UpAct(a), UpAct(b), Up(gamma), Up(beta), 1e-5f, sum, y, mean, rstd);
    cpu_->AddLayerNormForward(a, b, gamma, beta, 1e-5f, sumh, yh, mh, rh);
    // The sum is one rounded addition on both sides: the same values (the
    // GPU's in the activation dtype, widened exactly).
    EXPECT_EQ(Down(sum), sumh.ToVector()) << GetParam().name;
    ExpectClose("AddLN y", y, yh);
    ExpectClose("AddLN mean", mean, mh, 1e-5);
    ExpectClose("AddLN rstd", rstd, rh, 1e-5);
  }
}

TEST_P(CudaBackendTest, AddLayerNormBackwardMatchesCpuTwin) {
  const RowsC shapes[] = {{7, 37}, {33, 100}, {256, 768}};
  uint64_t seed = 300;
  for (const RowsC& s : shapes) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "rows " << s.rows << " C " << s.c << " in place " << in_place);
      Tensor x = Rand({s.rows, s.c}, ++seed, -2.0f, 2.0f), gamma = Rand({s.c}, ++seed);
      Tensor beta = Rand({s.c}, ++seed), dy = Rand({s.rows, s.c}, ++seed), residual = Rand({s.rows, s.c}, ++seed);
      // mean and rstd from the CPU forward, used by both sides.
      Tensor yh = Tensor::Empty({s.rows, s.c}), mh = Tensor::Empty({s.rows}), rh = Tensor::Empty({s.rows});
      cpu_->LayerNormForward(x, gamma, beta, 1e-5f, yh, mh, rh);
      Tensor dgh = Rand({s.c}, ++seed), dbh = Rand({s.c}, ++seed);
      Tensor dg = Up(dgh), db = Up(dbh);
      Tensor dres = UpAct(residual);
      Tensor dx = in_place ? dres : PoisonedAct({s.rows, s.c});
      Tensor dxh = in_place ? residual : Tensor::Empty({s.rows, s.c});
      gpu_->AddLayerNormBackward(UpAct(x), UpAct(dy), Up(gamma), Up(mh), Up(rh), dres, dx, dg, db);
      cpu_->AddLayerNormBackward(x, dy, gamma, mh, rh, residual, dxh, dgh, dbh);
      ExpectClose("AddLN dx", dx, dxh);
      ExpectClose("AddLN dgamma +=", dg, dgh, std::max(tol(), 1e-5));
      ExpectClose("AddLN dbeta +=", db, dbh, std::max(tol(), 1e-5));
    }
  }
}

// The fused ops where the model calls them: one GPT block, forward and
// backward, on both backends with the same weights. Errors compound over the
// block's dozen ops, so the tolerance is 5x the single-op one.
TEST_P(CudaBackendTest, GptBlockForwardAndBackwardMatchCpu) {
  nn::ModelConfig config;
  config.kind = nn::ModelKind::kGpt;
  config.n_layer = 2;
  config.n_head = 3;
  config.n_embd = 48;  // c_fc N = 192: the GELU epilogue path
  config.seed = 7;
  nn::TransformerBlock gpu_block(*gpu_, "transformer.h.0", config);
  nn::TransformerBlock cpu_block(*cpu_, "transformer.h.0", config);
  const ParameterList gpu_params = gpu_block.Parameters(), cpu_params = cpu_block.Parameters();
  ASSERT_EQ(gpu_params.size(), cpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) gpu_->CopyFromHost(cpu_params[i]->value, gpu_params[i]->value);
  // The GEMM weights' 16-bit operand copies, from the values just copied (the
  // trainer does this after every change of the weights).
  nn::RefreshOperands(*gpu_, gpu_params);
  for (const Parameter* p : gpu_params) {
    if (sixteen_bit() && p->name.find(".c_") != std::string::npos) {
      EXPECT_TRUE(p->operand_copy.defined() && p->operand_copy.dtype() == act()) << p->name << " has no operand copy";
    }
  }
  const double block_tol = 5.0 * tol();
  const int64_t b = 2, t = 19;
  Tensor x = Rand({b, t, config.n_embd}, 400), dy = Rand({b, t, config.n_embd}, 401);
  auto y = gpu_block.Forward(UpAct(x), /*training=*/true, 0);
  auto yh = cpu_block.Forward(x, /*training=*/true, 0);
  ASSERT_TRUE(y.ok() && yh.ok());
  EXPECT_EQ(y->dtype(), act()) << "the block's output is an activation";
  ExpectClose("block y", *y, *yh, block_tol);
  auto dx = gpu_block.Backward(UpAct(dy), 0);
  auto dxh = cpu_block.Backward(dy, 0);
  ASSERT_TRUE(dx.ok() && dxh.ok());
  ExpectClose("block dx", *dx, *dxh, block_tol);
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    SCOPED_TRACE(cpu_params[i]->name);
    ExpectClose("block parameter grad", gpu_params[i]->grad, cpu_params[i]->grad, block_tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaBackendTest, ::testing::ValuesIn(AllModes()), ModeName);

}  // namespace
}  // namespace ringmaster::engine::testing
