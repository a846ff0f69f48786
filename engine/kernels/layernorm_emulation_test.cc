// The LayerNorm kernels' source (layernorm_kernels.cuh) run on the host
// through host_cuda, against the CPU backend of each storage type (f32, f16,
// bf16), over rows x c = 1 x 1, 3 x 7, 5 x 33, 9 x 64 (two blocks, the second
// partial) and 2 x 770, in packs where c allows and element by element, in
// every schedule; outputs start as NaN.
//
// Comparisons. The stored sum of AddLayerNorm and dy * xhat: bitwise (the
// same fp32 expression, one rounding). The statistics: the kernel sums in
// fp32 over a warp's shuffle tree, the CPU in double, so mean and rstd agree
// to 16 sqrt(c) fp32 ulps (a real error, e.g. dividing by c - 1 or dropping an
// element, is 1 / c: 40 times that at c = 770). y and dx: within one unit of
// the storage type (an fp32 value a hair from a rounding boundary may round
// the other way) plus 16 sqrt(c) fp32 ulps of the row's scale; dx with a
// residual also within the unit of LayerNorm's own rounded dx, which the CPU
// stores before adding the residual. dgamma (the column sums of dy * xhat)
// against the CPU's: within the fp32 summation bound rows * 2^-24 * sum |.|.

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/layernorm_kernels.cuh"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

using engine::Tensor;
using layernorm::kLnThreads;
using layernorm::kLnWarps;
using testing::Cpu;
using testing::Load;
using testing::NaNs;
using testing::RandomValues;
using testing::SameValues;
using testing::Store;
using testing::Ulp;
using testing::Values;
using testing::Within;

struct Shape2 {
  int64_t rows, c;
};
const Shape2 kShapes[] = {{1, 1}, {3, 7}, {5, 33}, {9, 64}, {2, 770}};
constexpr float kEps = 1e-5f;
constexpr double kF32Ulp = 1.0 / (1 << 24);

std::string Name(Shape2 s, int k, const host_cuda::LaunchOptions& o) {
  return std::to_string(s.rows) + " x " + std::to_string(s.c) + ", K " + std::to_string(k) + ", " +
         host_cuda::ToString(o);
}

Tensor Mat(const std::vector<float>& v, Shape2 s) { return Tensor::FromVector({s.rows, s.c}, v); }
Tensor Vec(const std::vector<float>& v) { return Tensor::FromVector({static_cast<int64_t>(v.size())}, v); }
Tensor Zeros(int64_t n) { return Vec(std::vector<float>(n, 0.0f)); }

// Mean and rstd agree to 16 sqrt(c) fp32 ulps (relative; mean also absolute
// to the data's scale).
double StatTolerance(int64_t c) { return 16.0 * std::sqrt(static_cast<double>(c)) * kF32Ulp; }

// Within one unit of T at want, plus the statistics' tolerance of the row's scale.
template <typename T>
std::function<double(size_t)> RowTolerance(const std::vector<float>& want, Shape2 s) {
  std::vector<double> row_scale(s.rows, 0.0);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t j = 0; j < s.c; ++j) row_scale[r] = std::max(row_scale[r], std::fabs(double{want[r * s.c + j]}));
  return [=](size_t i) {
    const double ulp = testing::DTypeOf<T>() == engine::DType::kF32 ? 0.0 : Ulp<T>(want[i]);
    return ulp + StatTolerance(s.c) * (row_scale[i / s.c] + 1e-3);
  };
}

// The K values a test runs: element by element, and packs when c allows.
template <typename T>
std::vector<int> Ks(int64_t c) {
  std::vector<int> ks = {1};
  if (c % Pack<T>::kSize == 0) ks.push_back(Pack<T>::kSize);
  return ks;
}

template <typename T, typename... Args>
void RunForward(int k, const host_cuda::LaunchOptions& o, Shape2 s, Args... args) {
  constexpr int P = Pack<T>::kSize;
  auto kernel = k == 1 ? layernorm::LayerNormForwardKernel<1, T> : layernorm::LayerNormForwardKernel<P, T>;
  ASSERT_TRUE(host_cuda::Launch(o, dim3(BlocksFor(s.rows, kLnWarps)), dim3(kLnThreads), 0, kernel, args...));
}

template <typename T, typename... Args>
void RunBackward(int k, const host_cuda::LaunchOptions& o, Shape2 s, Args... args) {
  constexpr int P = Pack<T>::kSize;
  auto kernel = k == 1 ? layernorm::LayerNormBackwardKernel<1, T> : layernorm::LayerNormBackwardKernel<P, T>;
  ASSERT_TRUE(host_cuda::Launch(o, dim3(BlocksFor(s.rows, kLnWarps)), dim3(kLnThreads), 0, kernel, args...));
}

template <typename T>
class LayerNormTest : public ::testing::Test {};
TYPED_TEST_SUITE(LayerNormTest, testing::StorageTypes, testing::StorageNames);

TYPED_TEST(LayerNormTest, ForwardMatchesCpu) {
  using T = TypeParam;
  for (Shape2 s : kShapes) {
    const int64_t n = s.rows * s.c;
    const std::vector<float> x = RandomValues<T>(n, 1, -3.0f, 5.0f);
    const std::vector<float> gamma = engine::testing::RandomVec(s.c, 2), beta = engine::testing::RandomVec(s.c, 3);
    Tensor y = Mat(std::vector<float>(n), s), mean = Zeros(s.rows), rstd = Zeros(s.rows);
    Cpu<T>().LayerNormForward(Mat(x, s), Vec(gamma), Vec(beta), kEps, y, mean, rstd);
    const std::vector<T> sx = Store<T>(x);
    for (int k : Ks<T>(s.c)) {
      for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
        SCOPED_TRACE(Name(s, k, o));
        std::vector<T> got_y = NaNs<T>(n);
        std::vector<float> got_mean(s.rows, NAN), got_rstd(s.rows, NAN);
        RunForward<T>(k, o, s, sx.data(), static_cast<const T*>(nullptr), static_cast<T*>(nullptr), gamma.data(),
                      beta.data(), kEps, s.rows, s.c, got_y.data(), got_mean.data(), got_rstd.data());
        EXPECT_TRUE(Within(got_mean, Values(mean), [&](size_t) { return StatTolerance(s.c) * 5.0; }));
        EXPECT_TRUE(Within(got_rstd, Values(rstd), [&](size_t i) { return StatTolerance(s.c) * rstd.f32()[i]; }));
        EXPECT_TRUE(Within(Load(got_y), Values(y), RowTolerance<T>(Values(y), s)));
      }
    }
  }
}

TYPED_TEST(LayerNormTest, AddForwardMatchesCpuAddThenLayerNorm) {
  using T = TypeParam;
  for (Shape2 s : kShapes) {
    const int64_t n = s.rows * s.c;
    const std::vector<float> a = RandomValues<T>(n, 4), b = RandomValues<T>(n, 5, 0.0f, 3.0f);
    const std::vector<float> gamma = engine::testing::RandomVec(s.c, 6), beta = engine::testing::RandomVec(s.c, 7);
    Tensor sum = Mat(std::vector<float>(n), s), y = Mat(std::vector<float>(n), s);
    Tensor mean = Zeros(s.rows), rstd = Zeros(s.rows);
    Cpu<T>().AddLayerNormForward(Mat(a, s), Mat(b, s), Vec(gamma), Vec(beta), kEps, sum, y, mean, rstd);
    const std::vector<T> sa = Store<T>(a), sb = Store<T>(b);
    for (int k : Ks<T>(s.c)) {
      for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
        SCOPED_TRACE(Name(s, k, o));
        std::vector<T> got_sum = NaNs<T>(n), got_y = NaNs<T>(n);
        std::vector<float> got_mean(s.rows, NAN), got_rstd(s.rows, NAN);
        RunForward<T>(k, o, s, sa.data(), sb.data(), got_sum.data(), gamma.data(), beta.data(), kEps, s.rows, s.c,
                      got_y.data(), got_mean.data(), got_rstd.data());
        EXPECT_TRUE(SameValues(Load(got_sum), Values(sum)));
        EXPECT_TRUE(Within(got_mean, Values(mean), [&](size_t) { return StatTolerance(s.c) * 5.0; }));
        EXPECT_TRUE(Within(got_rstd, Values(rstd), [&](size_t i) { return StatTolerance(s.c) * rstd.f32()[i]; }));
        EXPECT_TRUE(Within(Load(got_y), Values(y), RowTolerance<T>(Values(y), s)));
        // sum written over a (the residual stream updated in place).
        std::vector<T> in_place = sa, y2 = NaNs<T>(n);
        RunForward<T>(k, o, s, in_place.data(), sb.data(), in_place.data(), gamma.data(), beta.data(), kEps, s.rows,
                      s.c, y2.data(), got_mean.data(), got_rstd.data());
        EXPECT_TRUE(SameValues(Load(in_place), Values(sum)));
        EXPECT_TRUE(SameValues(Load(y2), Load(got_y)));
      }
    }
  }
}

TYPED_TEST(LayerNormTest, BackwardMatchesCpu) {
  using T = TypeParam;
  for (Shape2 s : kShapes) {
    const int64_t n = s.rows * s.c;
    const std::vector<float> x = RandomValues<T>(n, 8, -3.0f, 5.0f), dy = RandomValues<T>(n, 9);
    const std::vector<float> residual = RandomValues<T>(n, 10);
    const std::vector<float> gamma = engine::testing::RandomVec(s.c, 11), beta = engine::testing::RandomVec(s.c, 12);
    Tensor y = Mat(std::vector<float>(n), s), mean = Zeros(s.rows), rstd = Zeros(s.rows);
    Cpu<T>().LayerNormForward(Mat(x, s), Vec(gamma), Vec(beta), kEps, y, mean, rstd);
    Tensor ln_dx = Mat(std::vector<float>(n), s), dgamma = Zeros(s.c), dbeta = Zeros(s.c);
    Cpu<T>().LayerNormBackward(Mat(x, s), Mat(dy, s), Vec(gamma), mean, rstd, ln_dx, dgamma, dbeta);
    Tensor res_dx = Mat(std::vector<float>(n), s), dgamma2 = Zeros(s.c), dbeta2 = Zeros(s.c);
    Cpu<T>().AddLayerNormBackward(Mat(x, s), Mat(dy, s), Vec(gamma), mean, rstd, Mat(residual, s), res_dx, dgamma2,
                                  dbeta2);
    // dy * xhat, the kernel's expression.
    std::vector<float> want_dy_xhat(n);
    for (int64_t i = 0; i < n; ++i) {
      const float xhat = (x[i] - mean.f32()[i / s.c]) * rstd.f32()[i / s.c];
      want_dy_xhat[i] = dy[i] * xhat;
    }
    const std::vector<float> want_ln = Values(ln_dx), want_res = Values(res_dx);
    const auto ln_tol = RowTolerance<T>(want_ln, s);
    const auto res_tol = [&](size_t i) {
      const double ulp = testing::DTypeOf<T>() == engine::DType::kF32 ? 0.0 : Ulp<T>(want_ln[i]);
      return ulp + RowTolerance<T>(want_res, s)(i) + ln_tol(i);
    };
    const std::vector<T> sx = Store<T>(x), sdy = Store<T>(dy), sres = Store<T>(residual);
    for (int k : Ks<T>(s.c)) {
      for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
        SCOPED_TRACE(Name(s, k, o));
        std::vector<T> dx = NaNs<T>(n);
        std::vector<float> dy_xhat(n, NAN);
        RunBackward<T>(k, o, s, sx.data(), sdy.data(), gamma.data(), mean.f32(), rstd.f32(),
                       static_cast<const T*>(nullptr), s.rows, s.c, dx.data(), dy_xhat.data());
        EXPECT_TRUE(Within(Load(dx), want_ln, ln_tol));
        EXPECT_TRUE(SameValues(dy_xhat, want_dy_xhat));
        // dgamma: the column sums of dy * xhat, against the CPU's.
        std::vector<float> col(s.c, 0.0f);
        std::vector<double> abs_col(s.c, 0.0);
        for (int64_t i = 0; i < n; ++i) {
          col[i % s.c] += dy_xhat[i];
          abs_col[i % s.c] += std::fabs(dy_xhat[i]);
        }
        EXPECT_TRUE(Within(col, Values(dgamma), [&](size_t j) { return 2.0 * s.rows * kF32Ulp * abs_col[j]; }));
        // With the residual, also in place (dx aliasing the residual).
        std::vector<T> dx2 = NaNs<T>(n), in_place = sres;
        RunBackward<T>(k, o, s, sx.data(), sdy.data(), gamma.data(), mean.f32(), rstd.f32(), sres.data(), s.rows,
                       s.c, dx2.data(), dy_xhat.data());
        EXPECT_TRUE(Within(Load(dx2), want_res, res_tol));
        RunBackward<T>(k, o, s, sx.data(), sdy.data(), gamma.data(), mean.f32(), rstd.f32(), in_place.data(), s.rows,
                       s.c, in_place.data(), dy_xhat.data());
        EXPECT_TRUE(SameValues(Load(in_place), Load(dx2)));
      }
    }
  }
}

}  // namespace
}  // namespace ringmaster::kernels
