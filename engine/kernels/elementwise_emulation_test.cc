// The elementwise kernels' source (elementwise_kernels.cuh) run on the host
// through host_cuda, against the CPU backend of each storage type (f32, f16,
// bf16): every op over sizes 1, 31, 33, 1000 and 4099, each launched as the
// launcher launches it (packs of 16 bytes and a tail) in every schedule,
// element by element, and on one block (the grid-stride loop wraps); outputs
// start as NaN.
//
// Comparisons. Bitwise (value equality) wherever the kernel and the CPU
// evaluate the same fp32 expression on the same inputs and round once: add,
// mul, relu, relu backward, dropout (mask and output), convert, round,
// accumulate, fill, scale, axpy; GELU and its backward too, since here both
// sides use the host's tanhf and the same expression (on the device nvcc's
// tanhf and FMA contraction differ by an ulp of fp32, which the GPU tests
// bound). The inf/NaN check: the same flag.

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/elementwise_kernels.cuh"

#include <cmath>
#include <string>
#include <vector>

#include "engine/core/random.h"
#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

using engine::Tensor;
using testing::Cpu;
using testing::F32Tensor;
using testing::Load;
using testing::NaNs;
using testing::RandomValues;
using testing::SameValues;
using testing::Store;
using testing::TestSizes;
using testing::Values;

// One launch of MapKernel: packs or elements, its grid and schedule.
struct MapRun {
  bool vectorised;
  unsigned grid;
  host_cuda::LaunchOptions options;
  std::string Name() const {
    return std::string(vectorised ? "packs" : "elements") + ", grid " + std::to_string(grid) + ", " +
           host_cuda::ToString(options);
  }
};

// The launcher's launch in every schedule, element by element, and one block.
std::vector<MapRun> MapRuns(int64_t n, int k) {
  std::vector<MapRun> runs;
  for (const host_cuda::LaunchOptions& s : host_cuda::TestSchedules()) {
    runs.push_back({true, GridFor(elementwise::MapWork(n, k, true)), s});
  }
  runs.push_back({false, GridFor(n), {}});
  runs.push_back({true, 1, {}});
  return runs;
}

template <int K, typename Op>
void RunMap(const Op& op, int64_t n, const MapRun& run) {
  ASSERT_TRUE(host_cuda::Launch(run.options, dim3(run.grid), dim3(kThreads), 0, elementwise::MapKernel<K, Op>, op, n,
                                run.vectorised));
}

Tensor Zeros(int64_t n) { return F32Tensor(std::vector<float>(n, 0.0f)); }

template <typename T>
class ElementwiseTest : public ::testing::Test {};
TYPED_TEST_SUITE(ElementwiseTest, testing::StorageTypes, testing::StorageNames);

TYPED_TEST(ElementwiseTest, AddMatchesCpu) {
  using T = TypeParam;
  constexpr int K = Pack<T>::kSize;
  for (int64_t n : TestSizes()) {
    const std::vector<float> a = RandomValues<T>(n, 1), b = RandomValues<T>(n, 2);
    Tensor want = Zeros(n);
    Cpu<T>().Add(F32Tensor(a), F32Tensor(b), want);
    const std::vector<T> sa = Store<T>(a), sb = Store<T>(b);
    for (const MapRun& run : MapRuns(n, K)) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + run.Name());
      std::vector<T> out = NaNs<T>(n);
      RunMap<K>(elementwise::AddOp<T>{sa.data(), sb.data(), out.data()}, n, run);
      EXPECT_TRUE(SameValues(Load(out), Values(want)));
      std::vector<T> in_place = sa;  // out aliasing a
      RunMap<K>(elementwise::AddOp<T>{in_place.data(), sb.data(), in_place.data()}, n, run);
      EXPECT_TRUE(SameValues(Load(in_place), Values(want)));
    }
  }
}

TYPED_TEST(ElementwiseTest, DropoutAndItsBackwardMatchCpu) {
  using T = TypeParam;
  constexpr int K = Pack<T>::kSize;
  const float p = 0.3f, keep_scale = 1.0f / (1.0f - p);
  const uint64_t key = 0x5eed;
  for (int64_t n : TestSizes()) {
    const std::vector<float> x = RandomValues<T>(n, 3), dy = RandomValues<T>(n, 4);
    Tensor want_mask = Zeros(n), want_y = Zeros(n), want_dx = Zeros(n);
    Cpu<T>().DropoutForward(F32Tensor(x), p, key, want_mask, want_y);
    Cpu<T>().DropoutBackward(F32Tensor(dy), want_mask, want_dx);
    const std::vector<T> sx = Store<T>(x), sdy = Store<T>(dy);
    const std::vector<float> cpu_mask = Values(want_mask);
    for (const MapRun& run : MapRuns(n, K)) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + run.Name());
      std::vector<float> mask(n, NAN);
      std::vector<T> y = NaNs<T>(n), dx = NaNs<T>(n);
      RunMap<K>(elementwise::DropoutOp<T>{sx.data(), p, keep_scale, key, mask.data(), y.data()}, n, run);
      EXPECT_TRUE(SameValues(mask, cpu_mask));
      EXPECT_TRUE(SameValues(Load(y), Values(want_y)));
      RunMap<K>(elementwise::MulOp<T>{sdy.data(), cpu_mask.data(), dx.data()}, n, run);
      EXPECT_TRUE(SameValues(Load(dx), Values(want_dx)));
    }
  }
}

TYPED_TEST(ElementwiseTest, ReluAndItsBackwardMatchCpu) {
  using T = TypeParam;
  constexpr int K = Pack<T>::kSize;
  for (int64_t n : TestSizes()) {
    std::vector<float> x = RandomValues<T>(n, 5);
    for (int64_t i = 0; i < n; i += 7) x[i] = 0.0f;  // the boundary
    const std::vector<float> dy = RandomValues<T>(n, 6);
    Tensor want_y = Zeros(n), want_dx = Zeros(n);
    Cpu<T>().ReluForward(F32Tensor(x), want_y);
    Cpu<T>().ReluBackward(want_y, F32Tensor(dy), want_dx);
    const std::vector<T> sx = Store<T>(x), sdy = Store<T>(dy);
    for (const MapRun& run : MapRuns(n, K)) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + run.Name());
      std::vector<T> y = NaNs<T>(n), dx = NaNs<T>(n);
      RunMap<K>(elementwise::ReluOp<T>{sx.data(), y.data()}, n, run);
      EXPECT_TRUE(SameValues(Load(y), Values(want_y)));
      RunMap<K>(elementwise::ReluBackwardOp<T>{y.data(), sdy.data(), dx.data()}, n, run);
      EXPECT_TRUE(SameValues(Load(dx), Values(want_dx)));
    }
  }
}

TYPED_TEST(ElementwiseTest, GeluAndItsBackwardMatchCpu) {
  using T = TypeParam;
  constexpr int K = Pack<T>::kSize;
  for (int64_t n : TestSizes()) {
    const std::vector<float> x = RandomValues<T>(n, 7, -5.0f, 5.0f), dy = RandomValues<T>(n, 8);
    Tensor want_y = Zeros(n), want_dx = Zeros(n);
    Cpu<T>().GeluForward(F32Tensor(x), want_y);
    Cpu<T>().GeluBackward(F32Tensor(x), F32Tensor(dy), want_dx);
    const std::vector<T> sx = Store<T>(x), sdy = Store<T>(dy);
    for (const MapRun& run : MapRuns(n, K)) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + run.Name());
      std::vector<T> y = NaNs<T>(n), dx = NaNs<T>(n);
      RunMap<K>(elementwise::GeluOp<T>{sx.data(), y.data()}, n, run);
      EXPECT_TRUE(SameValues(Load(y), Values(want_y)));
      RunMap<K>(elementwise::GeluBackwardOp<T>{sx.data(), sdy.data(), dx.data()}, n, run);
      EXPECT_TRUE(SameValues(Load(dx), Values(want_dx)));
    }
  }
}

// src (TypeParam) converted to each storage type D.
template <typename S, typename D>
void CheckConvert() {
  constexpr int K = Pack<S>::kSize > Pack<D>::kSize ? Pack<S>::kSize : Pack<D>::kSize;
  for (int64_t n : TestSizes()) {
    // Values of S spanning D's range edges: f16 overflows past 65504 and
    // loses precision below 6e-5 (subnormals).
    std::vector<float> src = engine::testing::RandomVec(n, 9, -3.0f, 3.0f);
    for (int64_t i = 0; i < n; ++i) src[i] = std::ldexp(src[i], static_cast<int>(i % 41) - 20);
    src = testing::Rounded<S>(src);
    Tensor dst = Tensor::Empty({n}, testing::DTypeOf<D>());
    Tensor src_t = Tensor::Empty({n}, testing::DTypeOf<S>());
    Cpu<float>().Convert(F32Tensor(src), src_t);  // S's storage of the (exact) values
    Cpu<float>().Convert(src_t, dst);
    Tensor want = Zeros(n);
    Cpu<float>().Convert(dst, want);
    const std::vector<S> ssrc = Store<S>(src);
    for (const MapRun& run : MapRuns(n, K)) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + run.Name());
      std::vector<D> out = NaNs<D>(n);
      RunMap<K>(elementwise::ConvertOp<S, D>{ssrc.data(), out.data()}, n, run);
      EXPECT_TRUE(SameValues(Load(out), Values(want)));
    }
  }
}

TYPED_TEST(ElementwiseTest, ConvertToEveryStorageTypeMatchesCpu) {
  CheckConvert<TypeParam, float>();
  CheckConvert<TypeParam, __half>();
  CheckConvert<TypeParam, __nv_bfloat16>();
}

// Round to TypeParam, kept as f32 (the values not rounded beforehand).
TYPED_TEST(ElementwiseTest, RoundMatchesCpu) {
  using R = TypeParam;
  for (int64_t n : TestSizes()) {
    const std::vector<float> src = engine::testing::RandomVec(n, 10, -100.0f, 100.0f);
    Tensor want = F32Tensor(src);
    Cpu<float>().RoundInPlace(want, testing::DTypeOf<R>());
    for (const MapRun& run : MapRuns(n, 4)) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + run.Name());
      std::vector<float> dst(n, NAN);
      RunMap<4>(elementwise::RoundOp<R>{src.data(), dst.data()}, n, run);
      EXPECT_TRUE(SameValues(dst, Values(want)));
    }
  }
}

// dst (f32) += src (TypeParam): the CPU's Axpy with alpha 1 (1 * x is exact).
TYPED_TEST(ElementwiseTest, AccumulateMatchesCpu) {
  using S = TypeParam;
  constexpr int K = Pack<S>::kSize;
  for (int64_t n : TestSizes()) {
    const std::vector<float> src = RandomValues<S>(n, 11), dst0 = engine::testing::RandomVec(n, 12);
    Tensor want = F32Tensor(dst0);
    Cpu<float>().Axpy(1.0f, F32Tensor(src), want);
    const std::vector<S> ssrc = Store<S>(src);
    for (const MapRun& run : MapRuns(n, K)) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + run.Name());
      std::vector<float> dst = dst0;
      RunMap<K>(elementwise::AccumulateOp<S>{ssrc.data(), dst.data()}, n, run);
      EXPECT_TRUE(SameValues(dst, Values(want)));
    }
  }
}

TEST(ElementwiseF32Test, FillScaleAxpyMatchCpu) {
  for (int64_t n : TestSizes()) {
    const std::vector<float> x = engine::testing::RandomVec(n, 13), y0 = engine::testing::RandomVec(n, 14);
    Tensor want_fill = Zeros(n), want_scale = F32Tensor(y0), want_axpy = F32Tensor(y0);
    Cpu<float>().Fill(want_fill, 0.75f);
    Cpu<float>().Scale(want_scale, -1.5f);
    Cpu<float>().Axpy(0.3f, F32Tensor(x), want_axpy);
    for (const MapRun& run : MapRuns(n, 4)) {
      SCOPED_TRACE("n " + std::to_string(n) + ", " + run.Name());
      std::vector<float> fill(n, NAN), scale = y0, axpy = y0;
      RunMap<4>(elementwise::FillOp{fill.data(), 0.75f}, n, run);
      EXPECT_TRUE(SameValues(fill, Values(want_fill)));
      RunMap<4>(elementwise::ScaleOp{scale.data(), -1.5f}, n, run);
      EXPECT_TRUE(SameValues(scale, Values(want_scale)));
      RunMap<4>(elementwise::AxpyOp{0.3f, x.data(), axpy.data()}, n, run);
      EXPECT_TRUE(SameValues(axpy, Values(want_axpy)));
    }
  }
}

// The flag is set exactly when an inf or NaN is present, wherever it sits
// (first element, a pack, the tail past the packs) and left alone otherwise.
TEST(ElementwiseF32Test, NonFiniteCheckMatchesCpu) {
  for (int64_t n : TestSizes()) {
    for (int64_t bad_at : {int64_t{-1}, int64_t{0}, n / 2, n - 1}) {
      for (float bad : {INFINITY, -INFINITY, NAN}) {
        std::vector<float> x = engine::testing::RandomVec(n, 15);
        if (bad_at >= 0) x[bad_at] = bad;
        Tensor want = F32Tensor({0.0f});
        Cpu<float>().NonFiniteCheck({F32Tensor(x)}, want);
        for (const MapRun& run : MapRuns(n, 4)) {
          SCOPED_TRACE("n " + std::to_string(n) + ", bad at " + std::to_string(bad_at) + ", " + run.Name());
          float flag = 0.0f;
          ASSERT_TRUE(host_cuda::Launch(run.options, dim3(run.grid), dim3(kThreads), 0,
                                        elementwise::NonFiniteKernel<4>, x.data(), n, run.vectorised, &flag));
          EXPECT_EQ(flag, want.f32()[0]);
        }
        if (bad_at < 0) break;  // one all-finite case per size
      }
    }
  }
}

}  // namespace
}  // namespace ringmaster::kernels
