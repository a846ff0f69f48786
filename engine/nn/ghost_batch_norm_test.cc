// BatchNorm2d's ghost batches: one chunk is bitwise the plain batch norm;
// K chunks are K independent batch norms (forward and backward); the running
// statistics follow the documented formula; BuildModel plumbs the setting.

#include <vector>

#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "engine/nn/conv.h"
#include "engine/nn/grad_check.h"
#include "engine/nn/model_factory.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::nn {
namespace {

using engine::testing::BitwiseEqual;
using engine::testing::MaxAbsDiff;
using engine::testing::RandomTensor;

class GhostBatchNormTest : public ::testing::Test {
 protected:
  CpuBackend backend_{CpuBackendConfig{2, DType::kF32}};
};

// Sets weight and bias to non-trivial values so that mistakes in gamma/beta show.
void SetAffine(BatchNorm2d& bn, uint64_t seed) {
  ParameterList p = bn.Parameters();
  const int64_t c = p[0]->value.numel();
  std::vector<float> w = RandomTensor({c}, seed, 0.5f, 1.5f).ToVector();
  std::vector<float> b = RandomTensor({c}, seed + 1).ToVector();
  for (int64_t i = 0; i < c; ++i) {
    p[0]->value.f32()[i] = w[i];
    p[1]->value.f32()[i] = b[i];
  }
}

TEST_F(GhostBatchNormTest, OneChunkIsBitwiseThePlainKernel) {
  const Tensor x = RandomTensor({6, 3, 4, 5}, 1, -2.0f, 3.0f);
  const Tensor dy = RandomTensor(x.shape(), 2);
  for (int64_t ghost : {0, 6, 100}) {
    BatchNorm2d bn(backend_, "bn", 3, 0.1f, 1e-5f, ghost);
    SetAffine(bn, 3);
    // The reference: the backend kernels called once on the whole batch, as
    // BatchNorm2d did before ghost batches existed.
    Tensor gamma = bn.Parameters()[0]->value, beta = bn.Parameters()[1]->value;
    Tensor rm = Tensor::Zeros({3}), rv = Tensor::FromVector({3}, {1, 1, 1});
    Tensor y_ref = Tensor::Empty(x.shape()), mean = Tensor::Empty({3}), invstd = Tensor::Empty({3});
    backend_.BatchNorm2dForwardTrain(x, gamma, beta, 0.1f, 1e-5f, rm, rv, y_ref, mean, invstd);
    Tensor dx_ref = Tensor::Empty(x.shape()), dg_ref = Tensor::Zeros({3}), db_ref = Tensor::Zeros({3});
    backend_.BatchNorm2dBackward(x, dy, gamma, mean, invstd, dx_ref, dg_ref, db_ref);

    absl::StatusOr<Tensor> y = bn.Forward(x, true, 0);
    ASSERT_TRUE(y.ok()) << y.status();
    absl::StatusOr<Tensor> dx = bn.Backward(dy, 0);
    ASSERT_TRUE(dx.ok()) << dx.status();
    EXPECT_TRUE(BitwiseEqual(*y, y_ref)) << "ghost " << ghost;
    EXPECT_TRUE(BitwiseEqual(*dx, dx_ref)) << "ghost " << ghost;
    EXPECT_TRUE(BitwiseEqual(bn.Parameters()[0]->grad, dg_ref));
    EXPECT_TRUE(BitwiseEqual(bn.Parameters()[1]->grad, db_ref));
    EXPECT_TRUE(BitwiseEqual(bn.Buffers()[0]->value, rm));
    EXPECT_TRUE(BitwiseEqual(bn.Buffers()[1]->value, rv));
  }
}

// Ghost batch g over N samples equals separate layers over each chunk of g
// (last chunk: the rest), bitwise for y and dx; parameter grads are the sums.
TEST_F(GhostBatchNormTest, ChunksAreIndependentBatchNorms) {
  const Tensor x = RandomTensor({7, 2, 3, 3}, 5, -1.0f, 2.0f);
  const Tensor dy = RandomTensor(x.shape(), 6);
  BatchNorm2d ghost(backend_, "bn", 2, 0.1f, 1e-5f, /*ghost_batch=*/3);
  SetAffine(ghost, 7);
  absl::StatusOr<Tensor> y = ghost.Forward(x, true, 0);
  ASSERT_TRUE(y.ok()) << y.status();
  absl::StatusOr<Tensor> dx = ghost.Backward(dy, 0);
  ASSERT_TRUE(dx.ok()) << dx.status();

  std::vector<float> dgamma(2, 0.0f), dbeta(2, 0.0f);
  for (auto [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 7}}) {
    BatchNorm2d plain(backend_, "bn", 2, 0.1f, 1e-5f);
    SetAffine(plain, 7);
    absl::StatusOr<Tensor> yc = plain.Forward(x.Rows(begin, end), true, 0);
    ASSERT_TRUE(yc.ok()) << yc.status();
    absl::StatusOr<Tensor> dxc = plain.Backward(dy.Rows(begin, end), 0);
    ASSERT_TRUE(dxc.ok());
    EXPECT_TRUE(BitwiseEqual(y->Rows(begin, end), *yc)) << "chunk at " << begin;
    EXPECT_TRUE(BitwiseEqual(dx->Rows(begin, end), *dxc)) << "chunk at " << begin;
    for (int c = 0; c < 2; ++c) {
      dgamma[c] += plain.Parameters()[0]->grad.f32()[c];
      dbeta[c] += plain.Parameters()[1]->grad.f32()[c];
    }
  }
  EXPECT_EQ(ghost.Parameters()[0]->grad.ToVector(), dgamma);
  EXPECT_EQ(ghost.Parameters()[1]->grad.ToVector(), dbeta);
}

TEST_F(GhostBatchNormTest, RunningStatisticsAverageTheChunkStatistics) {
  const float momentum = 0.25f;
  const Tensor x = RandomTensor({4, 1, 2, 3}, 9, -3.0f, 3.0f);
  BatchNorm2d bn(backend_, "bn", 1, momentum, 1e-5f, /*ghost_batch=*/2);
  ASSERT_TRUE(bn.Forward(x, true, 0).ok());
  ASSERT_TRUE(bn.Forward(x, true, 1).ok());  // twice: the old value must decay too
  // Chunk statistics in double: mean and unbiased variance of 12 values each.
  double mean_sum = 0.0, var_sum = 0.0;
  for (int k = 0; k < 2; ++k) {
    std::vector<float> v = x.Rows(2 * k, 2 * k + 2).ToVector();
    double m = 0.0, s = 0.0;
    for (float f : v) m += f;
    m /= v.size();
    for (float f : v) s += (f - m) * (f - m);
    mean_sum += m;
    var_sum += s / (v.size() - 1);
  }
  double rm = 0.0, rv = 1.0;
  for (int i = 0; i < 2; ++i) {
    rm = (1 - momentum) * rm + momentum * mean_sum / 2;
    rv = (1 - momentum) * rv + momentum * var_sum / 2;
  }
  EXPECT_NEAR(bn.Buffers()[0]->value.f32()[0], rm, 1e-6);
  EXPECT_NEAR(bn.Buffers()[1]->value.f32()[0], rv, 1e-6);
  EXPECT_EQ(bn.Buffers()[2]->value.f32()[0], 2.0f);  // num_batches_tracked: once per Forward
}

TEST_F(GhostBatchNormTest, GradientMatchesFiniteDifferences) {
  Tensor x = RandomTensor({5, 2, 2, 2}, 11);
  const Tensor w = RandomTensor(x.shape(), 12);
  BatchNorm2d bn(backend_, "bn", 2, 0.1f, 1e-5f, /*ghost_batch=*/2);
  SetAffine(bn, 13);
  ASSERT_TRUE(bn.Forward(x, true, 0).ok());
  absl::StatusOr<Tensor> dx = bn.Backward(w, 0);
  ASSERT_TRUE(dx.ok());
  auto loss = [&] {
    absl::StatusOr<Tensor> y = bn.Forward(x, true, 1);
    return y.ok() ? testing::WeightedSum(*y, w) : 0.0;
  };
  std::string report;
  double worst = testing::GradCheck(loss,
                                    {{"x", x, *dx},
                                     {"weight", bn.Parameters()[0]->value, bn.Parameters()[0]->grad},
                                     {"bias", bn.Parameters()[1]->value, bn.Parameters()[1]->grad}},
                                    {}, &report);
  EXPECT_LE(worst, 1.0) << report;
}

TEST_F(GhostBatchNormTest, LastChunkWithOneValuePerChannelIsRejected) {
  BatchNorm2d bn(backend_, "bn", 2, 0.1f, 1e-5f, /*ghost_batch=*/2);
  absl::StatusOr<Tensor> y = bn.Forward(RandomTensor({5, 2, 1, 1}, 1), true, 0);
  ASSERT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(y.status().message().find("ghost batches of 2"), std::string::npos) << y.status();
  EXPECT_TRUE(bn.Forward(RandomTensor({4, 2, 1, 1}, 1), true, 0).ok());
}

TEST_F(GhostBatchNormTest, ModelConfigSetsTheGhostBatch) {
  ModelConfig config;
  config.kind = ModelKind::kCnn;
  config.input_height = config.input_width = 8;
  config.conv_channels = {2, 3};
  config.bn_ghost_batch = 4;
  absl::StatusOr<std::unique_ptr<Model>> model = BuildModel(config, backend_);
  ASSERT_TRUE(model.ok()) << model.status();
  // An 8-sample batch in two chunks differs from one 8-sample batch norm.
  config.bn_ghost_batch = 0;
  absl::StatusOr<std::unique_ptr<Model>> plain = BuildModel(config, backend_);
  ASSERT_TRUE(plain.ok());
  const Tensor x = RandomTensor({8, 1, 8, 8}, 3);
  absl::StatusOr<Tensor> a = (*model)->Forward(x, true), b = (*plain)->Forward(x, true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(MaxAbsDiff(a->ToVector(), b->ToVector()), 1e-4);
  // ... and equals the plain model run on each half separately (up to the
  // GEMMs' blocking, which may depend on the number of rows).
  absl::StatusOr<Tensor> h0 = (*plain)->Forward(x.Rows(0, 4), true, 0, -1, 1);
  absl::StatusOr<Tensor> h1 = (*plain)->Forward(x.Rows(4, 8), true, 0, -1, 2);
  ASSERT_TRUE(h0.ok() && h1.ok());
  EXPECT_LE(MaxAbsDiff(a->Rows(0, 4).ToVector(), h0->ToVector()), 1e-5);
  EXPECT_LE(MaxAbsDiff(a->Rows(4, 8).ToVector(), h1->ToVector()), 1e-5);

  config.bn_ghost_batch = -1;
  EXPECT_EQ(BuildModel(config, backend_).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::engine::nn
