// The flash attention kernels' own source (flash_attention_kernels.cuh) run on
// the host by the host_cuda harness, with the launchers' grids, blocks and
// order (forward; RowDot, dK/dV, dQ), under every schedule, for each storage
// type (f32, f16, bf16), over b x t x nh x hd = 2 x 1 x 2 x 64 (t = 1),
// 2 x 17 x 3 x 8 (a partial tile and warp), 1 x 64 x 2 x 48 (exactly one
// block), 2 x 100 x 2 x 64, 1 x 130 x 2 x 32 (three blocks, the last partial),
// 2 x 33 x 1 x 20 (rows that are not whole 16-bit packs: element loads and
// stores) and 1 x 40 x 2 x 6 (not whole f32 packs either).
//
// Against the CPU twin (engine/core/flash_attention_reference) run in fp32 on
// the inputs the kernels read (16-bit values where T is 16-bit; backward from
// the kernels' own stored out and lse): out and dqkv within one unit in the
// last place of T plus kF32Tol = 2e-6 of the largest |value| (the fp32
// results differ by up to about 5e-7 of it: the sums run in other orders, and
// the kernels use FMAs and exp2; one 16-bit rounding of such a value can land
// one unit away), lse within kF32Tol relative, dsum against a double dot
// product within kF32Tol of sum |dout out|.
// Separately, exactly: a 16-bit run stores the f32 run's values on the same
// inputs rounded once to nearest even (bit for bit), with lse and dsum equal.
//
// Outputs start as NaN (an element never written stays NaN and fails), inputs
// and outputs are followed by guard zones (NaN after inputs, so a read past
// the end poisons a result; a sentinel after outputs, which must survive a
// write past the end), and the harness poisons shared memory at every block
// start. It says nothing about device code generation or timing;
// engine/cuda/cuda_attention_test.cc runs the kernels on a GPU.

#include "engine/kernels/attention.h"  // AttentionDims; before host_cuda.h (the CUDA runtime's own declarations)
#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/flash_attention_kernels.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/flash_attention_reference.h"
#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

using flash::kRowDotThreads;
using flash::kTileThreads;
using flash::TileGrid;
using testing::Load;
using testing::NaNs;
using testing::RandomValues;
using testing::SameValues;
using testing::Store;
using testing::Ulp;
using testing::Within;

// fp32 differences between the kernels and the twin, relative to the largest |value|.
constexpr double kF32Tol = 2e-6;

constexpr AttentionDims kCases[] = {{2, 1, 2, 64},   {2, 17, 3, 8},  {1, 64, 2, 48}, {2, 100, 2, 64},
                                    {1, 130, 2, 32}, {2, 33, 1, 20}, {1, 40, 2, 6}};

std::string Name(AttentionDims d) {
  return std::to_string(d.b) + " x " + std::to_string(d.t) + " x " + std::to_string(d.nh) + " x " +
         std::to_string(d.hd);
}

// A device buffer on the host: n elements, then a guard zone of `guard`
// elements holding `fill` (checked by GuardIntact).
template <typename T>
struct Guarded {
  Guarded(std::vector<T> v, size_t guard, T fill) : n(v.size()), data(std::move(v)) { data.resize(n + guard, fill); }
  std::vector<T> Values() const { return std::vector<T>(data.begin(), data.begin() + n); }
  ::testing::AssertionResult GuardIntact(T fill) const {
    for (size_t i = n; i < data.size(); ++i)
      if (std::memcmp(&data[i], &fill, sizeof(T)) != 0) {
        return ::testing::AssertionFailure() << "written past the end, " << i - n << " elements after it";
      }
    return ::testing::AssertionSuccess();
  }
  size_t n;
  std::vector<T> data;
};

template <typename T>
T Sentinel() {
  return FromFloat<T>(12345.0f);
}

// One case's inputs (values of T) and the kernels' outputs in T.
template <typename T>
struct FlashRun {
  FlashRun(AttentionDims dims, const std::vector<float>& qkv_values, const std::vector<float>& dout_values)
      : d(dims),
        c(d.nh * d.hd),
        // A block's rows past t reach at most kBlockRows - 1 rows past a tensor's end.
        guard(static_cast<size_t>(flash::kBlockRows * 3 * c)),
        scale(1.0f / std::sqrt(static_cast<float>(d.hd))),
        qkv(Store<T>(qkv_values), guard, FromFloat<T>(NAN)),
        dout(Store<T>(dout_values), guard, FromFloat<T>(NAN)),
        out(NaNs<T>(d.b * d.t * c), guard, Sentinel<T>()),
        dqkv(NaNs<T>(d.b * d.t * 3 * c), guard, Sentinel<T>()),
        lse(std::vector<float>(d.b * d.nh * d.t, NAN), flash::kBlockRows, 12345.0f),
        dsum(std::vector<float>(d.b * d.nh * d.t, NAN), flash::kBlockRows, 12345.0f) {}

  // flash_attention.cu's LaunchFlashAttentionForward.
  ::testing::AssertionResult Forward(const host_cuda::LaunchOptions& o) {
    return host_cuda::Launch(o, TileGrid(d), dim3(kTileThreads), 0, flash::FlashForwardKernel<T>,
                             static_cast<const T*>(qkv.data.data()), d, scale, out.data.data(), lse.data.data());
  }

  // flash_attention.cu's LaunchFlashAttentionBackward, from the stored out and lse.
  ::testing::AssertionResult Backward(const host_cuda::LaunchOptions& o) {
    ::testing::AssertionResult ok = host_cuda::Launch(
        o, dim3(GridFor(8 * d.b * d.nh * d.t, kRowDotThreads)), dim3(kRowDotThreads), 0, flash::RowDotKernel<T>,
        static_cast<const T*>(out.data.data()), static_cast<const T*>(dout.data.data()), d, dsum.data.data());
    if (!ok) return ok;
    ok = host_cuda::Launch(o, TileGrid(d), dim3(kTileThreads), 0, flash::FlashBackwardKvKernel<T>,
                           static_cast<const T*>(qkv.data.data()), static_cast<const T*>(dout.data.data()),
                           static_cast<const float*>(lse.data.data()), static_cast<const float*>(dsum.data.data()), d,
                           scale, dqkv.data.data());
    if (!ok) return ok;
    return host_cuda::Launch(o, TileGrid(d), dim3(kTileThreads), 0, flash::FlashBackwardQKernel<T>,
                             static_cast<const T*>(qkv.data.data()), static_cast<const T*>(dout.data.data()),
                             static_cast<const float*>(lse.data.data()), static_cast<const float*>(dsum.data.data()), d,
                             scale, dqkv.data.data());
  }

  ::testing::AssertionResult OutputGuardsIntact() const {
    ::testing::AssertionResult ok = out.GuardIntact(Sentinel<T>());
    if (ok) ok = dqkv.GuardIntact(Sentinel<T>());
    if (ok) ok = lse.GuardIntact(12345.0f);
    if (ok) ok = dsum.GuardIntact(12345.0f);
    return ok;
  }

  AttentionDims d;
  int64_t c;
  size_t guard;
  float scale;
  Guarded<T> qkv, dout, out, dqkv;
  Guarded<float> lse, dsum;
};

double MaxAbs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// |got - want| <= one unit of T at want + kF32Tol * max |want|.
template <typename T>
::testing::AssertionResult NearTwin(const std::vector<float>& got, const std::vector<float>& want) {
  const double abs = kF32Tol * MaxAbs(want);
  return Within(got, want, [&](size_t i) { return Ulp<T>(want[i]) + abs; });
}

// dsum_r = dout_r . out_r in double, and its bound: kF32Tol * sum |dout out| per row.
void RowDots(AttentionDims d, const std::vector<float>& out, const std::vector<float>& dout, std::vector<float>* dot,
             std::vector<double>* bound) {
  dot->assign(d.b * d.nh * d.t, 0.0f);
  bound->assign(dot->size(), 0.0);
  for (int64_t bi = 0; bi < d.b; ++bi)
    for (int64_t h = 0; h < d.nh; ++h)
      for (int64_t i = 0; i < d.t; ++i) {
        double s = 0.0, mag = 0.0;
        for (int64_t e = 0; e < d.hd; ++e) {
          const int64_t k = ((bi * d.t + i) * d.nh + h) * d.hd + e;
          s += double{out[k]} * dout[k];
          mag += std::fabs(double{out[k]} * dout[k]);
        }
        (*dot)[(bi * d.nh + h) * d.t + i] = static_cast<float>(s);
        (*bound)[(bi * d.nh + h) * d.t + i] = kF32Tol * mag;
      }
}

template <typename T>
class FlashAttentionEmulationTest : public ::testing::Test {};
TYPED_TEST_SUITE(FlashAttentionEmulationTest, testing::StorageTypes, testing::StorageNames);

TYPED_TEST(FlashAttentionEmulationTest, KernelsMatchTheCpuTwin) {
  using T = TypeParam;
  uint64_t seed = 500;
  for (const AttentionDims& d : kCases) {
    const int64_t c = d.nh * d.hd;
    // Scores of several units: the online rescaling across key tiles matters.
    const std::vector<float> qkv = RandomValues<T>(d.b * d.t * 3 * c, seed += 2, -2.0f, 2.0f);
    const std::vector<float> dout = RandomValues<T>(d.b * d.t * c, seed + 1);
    const engine::ref::FlashForwardResult twin = engine::ref::FlashAttentionForward(d.b, d.t, c, d.nh, qkv);
    for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
      SCOPED_TRACE(Name(d) + ", " + host_cuda::ToString(o));
      FlashRun<T> r(d, qkv, dout);
      ASSERT_TRUE(r.Forward(o));
      EXPECT_TRUE(NearTwin<T>(Load(r.out.Values()), twin.out)) << "out";
      const auto lse_tol = [&](size_t i) { return kF32Tol * std::max(1.0f, std::fabs(twin.lse[i])); };
      EXPECT_TRUE(Within(r.lse.Values(), twin.lse, lse_tol)) << "lse";
      ASSERT_TRUE(r.Backward(o));
      const std::vector<float> out = Load(r.out.Values());
      std::vector<float> want_dsum;
      std::vector<double> dsum_bound;
      RowDots(d, out, dout, &want_dsum, &dsum_bound);
      EXPECT_TRUE(Within(r.dsum.Values(), want_dsum, [&](size_t i) { return dsum_bound[i]; })) << "dsum";
      EXPECT_TRUE(NearTwin<T>(Load(r.dqkv.Values()),
                              engine::ref::FlashAttentionBackward(d.b, d.t, c, d.nh, qkv, out, r.lse.Values(), dout)))
          << "dqkv";
      EXPECT_TRUE(r.OutputGuardsIntact());
    }
  }
}

// The kernels round only what they store, once: a 16-bit run's out and dqkv
// are the f32 run's on the same values, rounded to nearest even; lse and dsum
// (f32 in both) are equal. Bit for bit.
template <typename T>
class FlashAttention16BitTest : public ::testing::Test {};
using Storage16 = ::testing::Types<__half, __nv_bfloat16>;
TYPED_TEST_SUITE(FlashAttention16BitTest, Storage16, testing::StorageNames);

TYPED_TEST(FlashAttention16BitTest, StoresAreTheF32ResultsRoundedOnce) {
  using T = TypeParam;
  for (const AttentionDims& d : {AttentionDims{2, 100, 2, 64}, AttentionDims{2, 33, 1, 20}}) {
    SCOPED_TRACE(Name(d));
    const int64_t c = d.nh * d.hd;
    const std::vector<float> qkv = RandomValues<T>(d.b * d.t * 3 * c, 900, -2.0f, 2.0f);
    const std::vector<float> dout = RandomValues<T>(d.b * d.t * c, 901);
    FlashRun<T> low(d, qkv, dout);
    ASSERT_TRUE(low.Forward({}));
    FlashRun<float> f32(d, qkv, dout);
    ASSERT_TRUE(f32.Forward({}));
    EXPECT_TRUE(SameValues(Load(low.out.Values()), testing::Rounded<T>(f32.out.Values())));
    EXPECT_TRUE(SameValues(low.lse.Values(), f32.lse.Values()));
    EXPECT_FALSE(SameValues(f32.out.Values(), testing::Rounded<T>(f32.out.Values())));  // the rounding does something
    // Backward from the same out (the 16-bit run's) and lse.
    for (size_t i = 0; i < f32.out.n; ++i) f32.out.data[i] = ToFloat(low.out.data[i]);
    f32.lse.data = low.lse.data;
    ASSERT_TRUE(low.Backward({}));
    ASSERT_TRUE(f32.Backward({}));
    EXPECT_TRUE(SameValues(low.dsum.Values(), f32.dsum.Values()));
    EXPECT_TRUE(SameValues(Load(low.dqkv.Values()), testing::Rounded<T>(f32.dqkv.Values())));
  }
}

}  // namespace
}  // namespace ringmaster::kernels
