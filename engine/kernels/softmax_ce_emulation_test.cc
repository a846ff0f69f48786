// The softmax cross-entropy kernels' source (softmax_ce_kernels.cuh) run on
// the host through host_cuda, against the CPU backend of each storage type
// (f32, f16, bf16): CountTargets, then SoftmaxCrossEntropyChunk over the rows
// in one chunk and in two (the loss accumulating), with m x v (ld) =
// 1 x 1, 3 x 7, 5 x 33 (40), 2 x 770 (776), 4 x 1000 and 7 x 50 (64), some
// rows ignored; dlogits separate, in place over the logits, and absent (the
// loss alone); in packs where ld allows and element by element; every
// schedule; outputs start as NaN. A target outside [0, v) traps.
//
// Comparisons. count: exact. Ignored rows and the padding columns v..ld of
// dlogits: exactly 0. Other dlogits: within one unit of the storage type plus
// 1e-5 relative plus 1e-7 of grad_scale / count (the kernel's row sum is an
// fp32 tree, the CPU's a double loop). The loss: within 1e-5 relative (fp32
// row losses summed in a tree against the CPU's double).

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/softmax_ce_kernels.cuh"

#include <cmath>
#include <string>
#include <vector>

#include "engine/core/random.h"
#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

using engine::Tensor;
using softmax_ce::kCeReduceThreads;
using softmax_ce::kCeThreads;
using testing::Cpu;
using testing::Load;
using testing::NaNs;
using testing::RandomValues;
using testing::Store;
using testing::Ulp;
using testing::Values;
using testing::Within;

constexpr int32_t kIgnore = -100;
constexpr float kGradScale = 1024.0f;

struct Case {
  int64_t m, v, ld;
};
const Case kCases[] = {{1, 1, 1}, {3, 7, 7}, {5, 33, 40}, {2, 770, 776}, {4, 1000, 1000}, {7, 50, 64}};

std::vector<int32_t> Targets(const Case& s, uint64_t seed) {
  engine::Rng rng(seed);
  std::vector<int32_t> t(s.m);
  for (int64_t i = 0; i < s.m; ++i) t[i] = static_cast<int32_t>(rng.Next() % s.v);
  if (s.m > 2) t[1] = kIgnore;  // an ignored row
  if (s.m > 5) t[s.m - 1] = kIgnore;
  return t;
}

template <typename T>
std::vector<int> Ks(int64_t ld) {
  std::vector<int> ks = {1};
  if (ld % Pack<T>::kSize == 0) ks.push_back(Pack<T>::kSize);
  return ks;
}

// The launcher's sequence for rows [r0, r1): the row kernel, then the loss.
template <typename T>
void RunChunk(int k, const host_cuda::LaunchOptions& o, const Case& s, int64_t r0, int64_t r1, const T* logits,
              const int32_t* targets, const float* count, float* loss, T* dlogits) {
  constexpr int P = Pack<T>::kSize;
  auto kernel = k == 1 ? softmax_ce::SoftmaxCrossEntropyRowKernel<1, T> : softmax_ce::SoftmaxCrossEntropyRowKernel<P, T>;
  std::vector<float> scratch(r1 - r0, NAN);
  ASSERT_TRUE(host_cuda::Launch(o, dim3(static_cast<unsigned>(r1 - r0)), dim3(kCeThreads), 0, kernel,
                                logits + r0 * s.ld, s.v, s.ld, targets + r0, kIgnore, count, kGradScale,
                                scratch.data(), dlogits != nullptr ? dlogits + r0 * s.ld : nullptr));
  ASSERT_TRUE(host_cuda::Launch(o, dim3(1), dim3(kCeReduceThreads), 0, softmax_ce::CeLossKernel, scratch.data(),
                                r1 - r0, count, loss));
}

template <typename T>
class SoftmaxCrossEntropyTest : public ::testing::Test {};
TYPED_TEST_SUITE(SoftmaxCrossEntropyTest, testing::StorageTypes, testing::StorageNames);

TYPED_TEST(SoftmaxCrossEntropyTest, ChunksMatchCpu) {
  using T = TypeParam;
  for (const Case& s : kCases) {
    const std::vector<int32_t> targets = Targets(s, s.m * 131 + s.v);
    std::vector<float> logits = RandomValues<T>(s.m * s.ld, 1, -4.0f, 4.0f);
    for (int64_t r = 0; r < s.m; ++r)
      for (int64_t j = s.v; j < s.ld; ++j) logits[r * s.ld + j] = NAN;  // padding: never read into the softmax
    // The CPU: the count over the batch, then the chunks [0, split) and [split, m).
    const int64_t split = s.m / 2;
    Tensor count = Tensor::FromVector({1}, {0.0f}), loss = Tensor::FromVector({1}, {0.0f});
    Cpu<T>().CountTargets(Tensor::FromInts({s.m}, targets), kIgnore, count);
    Tensor dlogits = Tensor::FromVector({s.m, s.ld}, std::vector<float>(s.m * s.ld, 0.0f));
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, split}, {split, s.m}}) {
      if (r1 == r0) continue;
      Tensor rows = Tensor::FromVector({r1 - r0, s.ld}, std::vector<float>(logits.begin() + r0 * s.ld,
                                                                            logits.begin() + r1 * s.ld));
      Tensor drows = dlogits.Rows(r0, r1);
      Cpu<T>().SoftmaxCrossEntropyChunk(rows, s.v, Tensor::FromInts({r1 - r0}, {targets.begin() + r0,
                                                                               targets.begin() + r1}),
                                        kIgnore, count, kGradScale, loss, &drows);
    }
    const std::vector<float> want = Values(dlogits);
    const float g = kGradScale / count.f32()[0];
    const auto tol = [&](size_t i) {
      const double unit = testing::DTypeOf<T>() == engine::DType::kF32 ? 0.0 : Ulp<T>(want[i]);
      return unit + 1e-5 * std::fabs(want[i]) + 1e-7 * g;
    };
    const std::vector<T> sz = Store<T>(logits);
    for (int k : Ks<T>(s.ld)) {
      for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
        SCOPED_TRACE(std::to_string(s.m) + " x " + std::to_string(s.v) + " (" + std::to_string(s.ld) + "), K " +
                     std::to_string(k) + ", " + host_cuda::ToString(o));
        float got_count = NAN, got_loss = 0.0f, in_place_loss = 0.0f, loss_only = 0.0f;
        ASSERT_TRUE(host_cuda::Launch(o, dim3(1), dim3(kCeReduceThreads), 0, softmax_ce::CountTargetsKernel,
                                      targets.data(), s.m, kIgnore, &got_count));
        ASSERT_EQ(got_count, count.f32()[0]);
        std::vector<T> d = NaNs<T>(s.m * s.ld), in_place = sz;
        for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, split}, {split, s.m}}) {
          if (r1 == r0) continue;
          RunChunk<T>(k, o, s, r0, r1, sz.data(), targets.data(), &got_count, &got_loss, d.data());
          if (o.schedule != host_cuda::Schedule::kInOrder) continue;  // the variants once
          RunChunk<T>(k, o, s, r0, r1, in_place.data(), targets.data(), &got_count, &in_place_loss, in_place.data());
          RunChunk<T>(k, o, s, r0, r1, sz.data(), targets.data(), &got_count, &loss_only, static_cast<T*>(nullptr));
        }
        const std::vector<float> got = Load(d);
        EXPECT_TRUE(Within(got, want, tol));
        for (int64_t r = 0; r < s.m; ++r) {
          for (int64_t j = 0; j < s.ld; ++j) {
            if (j >= s.v || targets[r] == kIgnore) {
              ASSERT_EQ(got[r * s.ld + j], 0.0f) << "row " << r << " col " << j;
            }
          }
        }
        EXPECT_NEAR(got_loss, loss.f32()[0], 1e-5 * (1.0 + std::fabs(loss.f32()[0])));
        if (o.schedule != host_cuda::Schedule::kInOrder) continue;
        EXPECT_TRUE(testing::SameValues(Load(in_place), got));
        EXPECT_EQ(in_place_loss, got_loss);
        EXPECT_EQ(loss_only, got_loss);
      }
    }
  }
}

TYPED_TEST(SoftmaxCrossEntropyTest, EveryRowIgnoredGivesZeroLossAndGradient) {
  using T = TypeParam;
  const Case s{3, 33, 40};
  const std::vector<int32_t> targets(s.m, kIgnore);
  const std::vector<T> sz = Store<T>(RandomValues<T>(s.m * s.ld, 2));
  float count = NAN, loss = 0.25f;
  ASSERT_TRUE(host_cuda::Launch(dim3(1), dim3(kCeReduceThreads), 0, softmax_ce::CountTargetsKernel, targets.data(),
                                s.m, kIgnore, &count));
  EXPECT_EQ(count, 0.0f);
  std::vector<T> d = NaNs<T>(s.m * s.ld);
  RunChunk<T>(1, {}, s, 0, s.m, sz.data(), targets.data(), &count, &loss, d.data());
  EXPECT_EQ(loss, 0.25f);  // adds nothing
  EXPECT_TRUE(testing::SameValues(Load(d), std::vector<float>(s.m * s.ld, 0.0f)));
}

TEST(SoftmaxCrossEntropyTrapTest, TargetOutsideTheVocabularyTraps) {
  const Case s{2, 33, 40};
  const std::vector<float> z(s.m * s.ld, 0.0f);
  for (int32_t bad : {33, 39, -1}) {  // v, a padding column, negative but not ignore_index
    const std::vector<int32_t> targets = {3, bad};
    float count = 2.0f, loss = 0.0f;
    std::vector<float> scratch(s.m), d(s.m * s.ld);
    const host_cuda::LaunchResult r =
        host_cuda::Launch(dim3(2), dim3(kCeThreads), 0, softmax_ce::SoftmaxCrossEntropyRowKernel<1, float>, z.data(),
                          s.v, s.ld, targets.data(), kIgnore, &count, 1.0f, scratch.data(), d.data());
    EXPECT_FALSE(r.ok) << "target " << bad;
    EXPECT_NE(r.error.find("__trap"), std::string::npos) << r.error;
    (void)loss;
  }
}

}  // namespace
}  // namespace ringmaster::kernels
