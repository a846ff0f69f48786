// The unfused attention kernels' source (attention_kernels.cuh) run on the
// host through host_cuda. Head moves for each storage type (f32, f16, bf16)
// over b x t x nh x hd = 1 x 1 x 1 x 1, 2 x 3 x 2 x 5, 2 x 7 x 3 x 8,
// 1 x 33 x 2 x 16 and 2 x 5 x 1 x 770, as elements and as 16-byte packs where
// hd allows, against index loops of the layouts (the CPU backend's attention
// reads the fused layout with strided GEMMs; it has no head-move op):
// bitwise. The causal softmax, rounding to each type, against the
// probabilities the CPU backend's AttentionForward saves (its scores from the
// same q and k; ours from a double dot product, a few fp32 ulps apart), over
// b x nh x t = 1 x 1 x 1, 2 x 3 x 7, 1 x 2 x 33 and 1 x 1 x 70: within one unit
// of the rounding type plus 1e-5 relative; its backward against the CPU's
// loop (cpu_attention.cc's, written out here: the CPU backend fuses it between
// GEMMs): within one unit plus the fp32 bound on the row's dot product, whose
// order differs. Zeros above the diagonal: exact. Every schedule; outputs
// start as NaN.

#include "engine/kernels/attention.h"  // AttentionDims; before host_cuda.h (the CUDA runtime's own declarations)
#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/attention_kernels.cuh"

#include <cmath>
#include <string>
#include <vector>

#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

using attention::kAttnThreads;
using attention::kAttnWarps;
using engine::Tensor;
using testing::Cpu;
using testing::Load;
using testing::NaNs;
using testing::RandomValues;
using testing::SameValues;
using testing::Store;
using testing::Ulp;
using testing::Values;
using testing::Within;

std::string Name(AttentionDims d) {
  return std::to_string(d.b) + " x " + std::to_string(d.t) + " x " + std::to_string(d.nh) + " x " +
         std::to_string(d.hd);
}

// Offset of (bi, ti, part, h, e) in [b, t, parts, nh, hd], and of (bi, h, ti, e) in [b, nh, t, hd].
int64_t Fused(AttentionDims d, int parts, int64_t bi, int64_t ti, int64_t part, int64_t h, int64_t e) {
  return (((bi * d.t + ti) * parts + part) * d.nh + h) * d.hd + e;
}
int64_t Heads(AttentionDims d, int64_t bi, int64_t h, int64_t ti, int64_t e) {
  return ((bi * d.nh + h) * d.t + ti) * d.hd + e;
}

template <typename T>
class AttentionMoveTest : public ::testing::Test {};
TYPED_TEST_SUITE(AttentionMoveTest, testing::StorageTypes, testing::StorageNames);

// Runs a head-move kernel over elements (U = T) or packs (U = Pack<T>).
template <typename T, typename F>
void ForEachUnit(AttentionDims d, F&& run) {
  run(T{}, d, 1);
  constexpr int P = Pack<T>::kSize;
  if (d.hd % P == 0) {
    AttentionDims units = d;
    units.hd = d.hd / P;
    run(Pack<T>{}, units, P);
  }
}

TYPED_TEST(AttentionMoveTest, SplitMergeMatchTheLayouts) {
  using T = TypeParam;
  for (AttentionDims d : {AttentionDims{1, 1, 1, 1}, AttentionDims{2, 3, 2, 5}, AttentionDims{2, 7, 3, 8},
                          AttentionDims{1, 33, 2, 16}, AttentionDims{2, 5, 1, 770}}) {
    const int64_t n = d.b * d.t * d.nh * d.hd;
    const std::vector<float> qkv = RandomValues<T>(3 * n, 1), dq = RandomValues<T>(n, 2), dk = RandomValues<T>(n, 3),
                             dv = RandomValues<T>(n, 4);
    std::vector<float> want_q(n), want_k(n), want_v(n), want_dqkv(3 * n), want_out(n), want_y1(n);
    for (int64_t bi = 0; bi < d.b; ++bi)
      for (int64_t ti = 0; ti < d.t; ++ti)
        for (int64_t h = 0; h < d.nh; ++h)
          for (int64_t e = 0; e < d.hd; ++e) {
            const int64_t hi = Heads(d, bi, h, ti, e);
            want_q[hi] = qkv[Fused(d, 3, bi, ti, 0, h, e)];
            want_k[hi] = qkv[Fused(d, 3, bi, ti, 1, h, e)];
            want_v[hi] = qkv[Fused(d, 3, bi, ti, 2, h, e)];
            want_dqkv[Fused(d, 3, bi, ti, 0, h, e)] = dq[hi];
            want_dqkv[Fused(d, 3, bi, ti, 1, h, e)] = dk[hi];
            want_dqkv[Fused(d, 3, bi, ti, 2, h, e)] = dv[hi];
            want_out[Fused(d, 1, bi, ti, 0, h, e)] = dq[hi];      // MergeHeads of dq
            want_y1[hi] = qkv[Fused(d, 1, bi, ti, 0, h, e)];       // SplitHeads (parts 1) of qkv's first n
          }
    const std::vector<T> sqkv = Store<T>(qkv), sdq = Store<T>(dq), sdk = Store<T>(dk), sdv = Store<T>(dv);
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      ForEachUnit<T>(d, [&](auto unit, AttentionDims u, int k) {
        using U = decltype(unit);
        SCOPED_TRACE(Name(d) + ", unit " + std::to_string(k) + ", " + host_cuda::ToString(o));
        const dim3 grid(GridFor(u.b * u.nh * u.t * u.hd));
        std::vector<T> q = NaNs<T>(n), kk = NaNs<T>(n), v = NaNs<T>(n), dqkv = NaNs<T>(3 * n), out = NaNs<T>(n),
                       y1 = NaNs<T>(n);
        ASSERT_TRUE(host_cuda::Launch(o, grid, dim3(kThreads), 0, attention::SplitHeadsKernel<U>,
                                      reinterpret_cast<const U*>(sqkv.data()), u, 3, reinterpret_cast<U*>(q.data()),
                                      reinterpret_cast<U*>(kk.data()), reinterpret_cast<U*>(v.data())));
        ASSERT_TRUE(host_cuda::Launch(o, grid, dim3(kThreads), 0, attention::SplitHeadsKernel<U>,
                                      reinterpret_cast<const U*>(sqkv.data()), u, 1, reinterpret_cast<U*>(y1.data()),
                                      static_cast<U*>(nullptr), static_cast<U*>(nullptr)));
        ASSERT_TRUE(host_cuda::Launch(o, grid, dim3(kThreads), 0, attention::MergeQkvGradsKernel<U>,
                                      reinterpret_cast<const U*>(sdq.data()), reinterpret_cast<const U*>(sdk.data()),
                                      reinterpret_cast<const U*>(sdv.data()), u, reinterpret_cast<U*>(dqkv.data())));
        ASSERT_TRUE(host_cuda::Launch(o, grid, dim3(kThreads), 0, attention::MergeHeadsKernel<U>,
                                      reinterpret_cast<const U*>(sdq.data()), u, reinterpret_cast<U*>(out.data())));
        EXPECT_TRUE(SameValues(Load(q), want_q));
        EXPECT_TRUE(SameValues(Load(kk), want_k));
        EXPECT_TRUE(SameValues(Load(v), want_v));
        EXPECT_TRUE(SameValues(Load(y1), want_y1));
        EXPECT_TRUE(SameValues(Load(dqkv), want_dqkv));
        EXPECT_TRUE(SameValues(Load(out), want_out));
      });
    }
  }
}

template <typename R>
class CausalSoftmaxTest : public ::testing::Test {};
TYPED_TEST_SUITE(CausalSoftmaxTest, testing::StorageTypes, testing::StorageNames);

TYPED_TEST(CausalSoftmaxTest, ForwardAndBackwardMatchCpu) {
  using R = TypeParam;
  constexpr double kF32Ulp = 1.0 / (1 << 24);
  for (AttentionDims d : {AttentionDims{1, 1, 1, 4}, AttentionDims{2, 7, 3, 4}, AttentionDims{1, 33, 2, 4},
                          AttentionDims{1, 70, 1, 4}}) {
    const int64_t c = d.nh * d.hd, rows = d.b * d.nh * d.t, n = rows * d.t;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d.hd));
    const std::vector<float> qkv = RandomValues<R>(d.b * d.t * 3 * c, 5, -3.0f, 3.0f);
    Tensor att = Tensor::FromVector({d.b, d.nh, d.t, d.t}, std::vector<float>(n, 0.0f));
    Tensor out = Tensor::FromVector({d.b, d.t, c}, std::vector<float>(d.b * d.t * c, 0.0f));
    Cpu<R>().AttentionForward(Tensor::FromVector({d.b, d.t, 3 * c}, qkv), d.nh, att, out);
    const std::vector<float> want_p = Values(att);
    // The scaled scores, row (bi, h, i), column j.
    std::vector<float> scores(n);
    for (int64_t bi = 0; bi < d.b; ++bi)
      for (int64_t h = 0; h < d.nh; ++h)
        for (int64_t i = 0; i < d.t; ++i)
          for (int64_t j = 0; j < d.t; ++j) {
            double dot = 0.0;
            for (int64_t e = 0; e < d.hd; ++e)
              dot += double{qkv[(bi * d.t + i) * 3 * c + h * d.hd + e]} * qkv[(bi * d.t + j) * 3 * c + c + h * d.hd + e];
            scores[((bi * d.nh + h) * d.t + i) * d.t + j] = static_cast<float>(scale * dot);
          }
    // The backward's CPU loop (cpu_attention.cc) on the CPU's probabilities.
    const std::vector<float> dp = engine::testing::RandomVec(n, 6);
    std::vector<float> want_ds(n);
    std::vector<double> dot_bound(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % d.t;
      const float* p = want_p.data() + r * d.t;
      const float* g = dp.data() + r * d.t;
      float dot = 0.0f;
      double abs_dot = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        dot += p[j] * g[j];
        abs_dot += std::fabs(double{p[j]} * g[j]);
      }
      dot_bound[r] = 2.0 * (i + 1) * kF32Ulp * abs_dot;
      for (int64_t j = 0; j < d.t; ++j) want_ds[r * d.t + j] = j <= i ? testing::Round<R>(scale * p[j] * (g[j] - dot)) : 0.0f;
    }
    const auto unit = [](float v) { return testing::DTypeOf<R>() == engine::DType::kF32 ? 0.0 : Ulp<R>(v); };
    const auto p_tol = [&](size_t e) { return want_p[e] == 0.0f ? 0.0 : unit(want_p[e]) + 1e-5 * want_p[e] + 1e-7; };
    const auto ds_tol = [&](size_t e) {
      if (want_ds[e] == 0.0f && static_cast<int64_t>(e % d.t) > static_cast<int64_t>((e / d.t) % d.t)) return 0.0;
      return unit(want_ds[e]) + 1e-6 * std::fabs(want_ds[e]) + scale * std::fabs(want_p[e]) * dot_bound[e / d.t];
    };
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      SCOPED_TRACE(Name(d) + ", " + host_cuda::ToString(o));
      std::vector<float> p = scores, ds = dp;
      ASSERT_TRUE(host_cuda::Launch(o, dim3(BlocksFor(rows, kAttnWarps)), dim3(kAttnThreads), 0,
                                    attention::CausalSoftmaxKernel<R>, p.data(), rows, d.t));
      EXPECT_TRUE(Within(p, want_p, p_tol));
      ASSERT_TRUE(host_cuda::Launch(o, dim3(BlocksFor(rows, kAttnWarps)), dim3(kAttnThreads), 0,
                                    attention::CausalSoftmaxBackwardKernel<R>, want_p.data(), ds.data(), rows, d.t,
                                    scale));
      EXPECT_TRUE(Within(ds, want_ds, ds_tol));
    }
  }
}

}  // namespace
}  // namespace ringmaster::kernels
