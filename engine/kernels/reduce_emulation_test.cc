// The reduction kernels' source (reduce_kernels.cuh) run on the host through
// host_cuda, against the CPU backend of each storage type (f32, f16, bf16):
// column sums (the CPU's BiasGrad) over rows x cols = 1 x 1, 3 x 7, 5 x 33,
// 2 x 770, 300 x 40 and 513 x 33 (one, two and three 256-row chunks, partial
// column tiles), overwriting and accumulating; channel sums (the bias
// gradient of the CPU's Conv2dBackward) over n x c x hw = 1 x 1 x 1,
// 2 x 3 x 7, 3 x 5 x 33 and 2 x 4 x 770; in every schedule, outputs starting
// as NaN where they are overwritten.
//
// Comparisons: within one unit of the storage type of the sum (the CPU rounds
// each new contribution to it; the device adds it in fp32, unrounded) plus the
// fp32 summation bound 2 * rows * 2^-24 * sum |x| (the two sum in different
// orders). A dropped row, a chunk summed twice or an unwritten output is far
// outside it.

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/reduce_kernels.cuh"

#include <cmath>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

using engine::Tensor;
using testing::Cpu;
using testing::NaNs;
using testing::RandomValues;
using testing::Store;
using testing::Values;
using testing::Within;

constexpr double kF32Ulp = 1.0 / (1 << 24);

// |got - want| within a unit of T at the exact sum plus the summation bound.
template <typename T>
std::function<double(size_t)> SumTolerance(const std::vector<double>& exact, const std::vector<double>& abs_sum,
                                           int64_t terms) {
  return [=](size_t j) {
    const double unit = testing::DTypeOf<T>() == engine::DType::kF32 ? 0.0 : testing::Ulp<T>(exact[j]);
    return unit + 2.0 * static_cast<double>(terms) * kF32Ulp * abs_sum[j] + 1e-30;
  };
}

template <typename T>
class ReduceTest : public ::testing::Test {};
TYPED_TEST_SUITE(ReduceTest, testing::StorageTypes, testing::StorageNames);

TYPED_TEST(ReduceTest, ColumnSumMatchesCpuBiasGrad) {
  using T = TypeParam;
  struct Case {
    int64_t rows, cols;
  };
  for (Case s : {Case{1, 1}, Case{3, 7}, Case{5, 33}, Case{2, 770}, Case{300, 40}, Case{513, 33}}) {
    const std::vector<float> x = RandomValues<T>(s.rows * s.cols, 1);
    const std::vector<float> out0 = engine::testing::RandomVec(s.cols, 2);
    Tensor want_acc = Tensor::FromVector({s.cols}, out0);
    Tensor want_set = Tensor::FromVector({s.cols}, std::vector<float>(s.cols, 0.0f));
    Cpu<T>().BiasGrad(Tensor::FromVector({s.rows, s.cols}, x), want_acc);
    Cpu<T>().BiasGrad(Tensor::FromVector({s.rows, s.cols}, x), want_set);
    std::vector<double> exact(s.cols, 0.0), abs_sum(s.cols, 0.0);
    for (int64_t i = 0; i < s.rows * s.cols; ++i) {
      exact[i % s.cols] += x[i];
      abs_sum[i % s.cols] += std::fabs(x[i]);
    }
    std::vector<double> abs_acc = abs_sum;
    for (int64_t j = 0; j < s.cols; ++j) abs_acc[j] += std::fabs(out0[j]);
    const std::vector<T> sx = Store<T>(x);
    const int64_t chunks = reduce::Chunks(s.rows);
    const dim3 grid(static_cast<unsigned>((s.cols + reduce::kTileCols - 1) / reduce::kTileCols),
                    static_cast<unsigned>(chunks));
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      SCOPED_TRACE(std::to_string(s.rows) + " x " + std::to_string(s.cols) + ", " + host_cuda::ToString(o));
      std::vector<float> scratch(chunks * s.cols, NAN), acc = out0, set(s.cols, NAN);
      ASSERT_TRUE(host_cuda::Launch(o, grid, dim3(reduce::kTileCols, reduce::kTileRows), 0,
                                    reduce::ColumnPartialKernel<T>, sx.data(), s.rows, s.cols, scratch.data()));
      ASSERT_TRUE(host_cuda::Launch(o, dim3(GridFor(s.cols)), dim3(kThreads), 0, reduce::ColumnFinishKernel,
                                    scratch.data(), chunks, s.cols, acc.data(), true));
      ASSERT_TRUE(host_cuda::Launch(o, dim3(GridFor(s.cols)), dim3(kThreads), 0, reduce::ColumnFinishKernel,
                                    scratch.data(), chunks, s.cols, set.data(), false));
      EXPECT_TRUE(Within(acc, Values(want_acc), SumTolerance<T>(exact, abs_acc, s.rows + 1)));
      EXPECT_TRUE(Within(set, Values(want_set), SumTolerance<T>(exact, abs_sum, s.rows)));
    }
  }
}

TYPED_TEST(ReduceTest, ChannelSumMatchesCpuConvBiasGrad) {
  using T = TypeParam;
  struct Case {
    int64_t n, c, hw;
  };
  for (Case s : {Case{1, 1, 1}, Case{2, 3, 7}, Case{3, 5, 33}, Case{2, 4, 770}}) {
    const std::vector<float> dy = RandomValues<T>(s.n * s.c * s.hw, 3);
    const std::vector<float> out0 = engine::testing::RandomVec(s.c, 4);
    // A 1 x 1 convolution of one input channel: its bias gradient is the channel sum of dy.
    engine::Conv2dGeometry g;
    g.kernel_h = g.kernel_w = 1;
    Tensor x = Tensor::FromVector({s.n, 1, 1, s.hw}, std::vector<float>(s.n * s.hw, 0.0f));
    Tensor w = Tensor::FromVector({s.c, 1, 1, 1}, std::vector<float>(s.c, 1.0f));
    Tensor dw = Tensor::FromVector({s.c, 1, 1, 1}, std::vector<float>(s.c, 0.0f));
    Tensor want = Tensor::FromVector({s.c}, out0);
    Cpu<T>().Conv2dBackward(x, w, Tensor::FromVector({s.n, s.c, 1, s.hw}, dy), g, nullptr, dw, &want);
    std::vector<double> exact(s.c, 0.0), abs_sum(s.c, 0.0);
    for (int64_t i = 0; i < s.n * s.c * s.hw; ++i) {
      exact[(i / s.hw) % s.c] += dy[i];
      abs_sum[(i / s.hw) % s.c] += std::fabs(dy[i]);
    }
    for (int64_t j = 0; j < s.c; ++j) abs_sum[j] += std::fabs(out0[j]);
    const std::vector<T> sdy = Store<T>(dy);
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      SCOPED_TRACE(std::to_string(s.n) + " x " + std::to_string(s.c) + " x " + std::to_string(s.hw) + ", " +
                   host_cuda::ToString(o));
      std::vector<float> out = out0;
      ASSERT_TRUE(host_cuda::Launch(o, dim3(static_cast<unsigned>(s.c)), dim3(kThreads), 0,
                                    reduce::ChannelSumKernel<T>, sdy.data(), s.n, s.c, s.hw, out.data()));
      EXPECT_TRUE(Within(out, Values(want), SumTolerance<T>(exact, abs_sum, s.n * s.hw + 1)));
    }
  }
}

}  // namespace
}  // namespace ringmaster::kernels
