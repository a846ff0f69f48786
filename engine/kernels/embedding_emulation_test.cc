// The embedding kernels' source (embedding_kernels.cuh) run on the host
// through host_cuda, against the CPU backend of each storage type (f32, f16,
// bf16). The backward runs the launcher's own sequence (RunBackward: the
// radix sort's passes, the runs, the carries, the position sums) over
// b x t (v, c) = 1 x 1 (1, 1), 3 x 7 (5, 7), 5 x 33 (40, 33), 2 x 770
// (1000, 8: two sort passes), 2 x 50 (70,000, 5: three), 4 x 300 (3, 12:
// every token over 256 times, summed in pieces) and 1 x 600 (4, 4: runs of
// 256 and 257, either side of the limit); the forward over 1 x 1, 3 x 7,
// 5 x 33, 2 x 3 (c = 770) and 2 x 40; in packs where c allows and element by
// element; every schedule; outputs start as NaN, the gradients from random
// values (they accumulate). A token outside [0, v) traps, in both directions.
//
// Comparisons. Forward: bitwise (the CPU rounds the operands, adds, rounds).
// dwpe: bitwise (the same additions in the same order). dwte: bitwise for
// tokens occurring at most 256 times (summed in position order from dwte's
// value, as the CPU does); a token occurring more often is summed in pieces of
// 64 positions added in order: within the fp32 bound 2 * n * 2^-24 * sum |.|.
// Determinism: every schedule gives bitwise the same gradients.

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/embedding_kernels.cuh"

#include <cmath>
#include <string>
#include <vector>

#include "engine/core/random.h"
#include "engine/kernels/emulation_test_util.h"

namespace ringmaster::kernels {
namespace {

using engine::Tensor;
using testing::Cpu;
using testing::Load;
using testing::NaNs;
using testing::RandomValues;
using testing::SameValues;
using testing::Store;
using testing::Values;

constexpr double kF32Ulp = 1.0 / (1 << 24);

struct Case {
  int64_t b, t, v, c;
  std::string Name() const {
    return std::to_string(b) + " x " + std::to_string(t) + " (v " + std::to_string(v) + ", c " + std::to_string(c) +
           ")";
  }
};

std::vector<int32_t> RandomTokens(const Case& s, uint64_t seed) {
  engine::Rng rng(seed);
  std::vector<int32_t> tokens(s.b * s.t);
  for (int32_t& tok : tokens) tok = static_cast<int32_t>(rng.Next() % s.v);
  return tokens;
}

template <typename T>
std::vector<int> Ks(int64_t c) {
  std::vector<int> ks = {1};
  if (c % Pack<T>::kSize == 0) ks.push_back(Pack<T>::kSize);
  return ks;
}

template <typename T>
class EmbeddingTest : public ::testing::Test {};
TYPED_TEST_SUITE(EmbeddingTest, testing::StorageTypes, testing::StorageNames);

TYPED_TEST(EmbeddingTest, ForwardMatchesCpu) {
  using T = TypeParam;
  constexpr int P = Pack<T>::kSize;
  for (const Case& s : {Case{1, 1, 1, 1}, Case{3, 7, 5, 7}, Case{5, 33, 40, 33}, Case{2, 3, 11, 770},
                        Case{2, 40, 1000, 64}}) {
    const std::vector<int32_t> tokens = RandomTokens(s, 1);
    const int64_t n = s.b * s.t * s.c;
    const std::vector<float> wte = engine::testing::RandomVec(s.v * s.c, 2);
    const std::vector<float> wpe = engine::testing::RandomVec((s.t + 1) * s.c, 3);  // [>= t, c]
    Tensor want = Tensor::FromVector({n}, std::vector<float>(n, 0.0f));
    Cpu<T>().EmbeddingForward(Tensor::FromInts({s.b, s.t}, tokens), Tensor::FromVector({s.v, s.c}, wte),
                              Tensor::FromVector({s.t + 1, s.c}, wpe), want);
    for (int k : Ks<T>(s.c)) {
      auto kernel = k == 1 ? embedding::EmbeddingForwardKernel<1, T> : embedding::EmbeddingForwardKernel<P, T>;
      for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
        SCOPED_TRACE(s.Name() + ", K " + std::to_string(k) + ", " + host_cuda::ToString(o));
        std::vector<T> out = NaNs<T>(n);
        ASSERT_TRUE(host_cuda::Launch(o, dim3(GridFor(n / k)), dim3(kThreads), 0, kernel, tokens.data(), wte.data(),
                                      wpe.data(), s.b * s.t, s.t, s.v, s.c, out.data()));
        EXPECT_TRUE(SameValues(Load(out), Values(want)));
      }
    }
  }
}

// Runs RunBackward<K> through host_cuda with schedule `o`; the gradients start
// at dwte0/dwpe0.
template <int K, typename T>
void RunBackward(const host_cuda::LaunchOptions& o, const Case& s, const std::vector<int32_t>& tokens,
                 const std::vector<T>& dout, std::vector<float>& dwte, std::vector<float>& dwpe) {
  std::vector<float> scratch(embedding::BackwardLayout(s.b * s.t, s.c, nullptr).floats, NAN);
  std::string error;
  auto launch = [&](auto kernel, dim3 grid, dim3 block, auto... args) {
    const host_cuda::LaunchResult r = host_cuda::Launch(o, grid, block, 0, kernel, args...);
    if (!r.ok) error = r.error;
    return r.ok;
  };
  const bool ok = embedding::RunBackward<K>(launch, tokens.data(), dout.data(), s.b, s.t, s.v, s.c, dwte.data(),
                                            dwpe.data(), scratch.data());
  ASSERT_TRUE(ok) << error;
}

TYPED_TEST(EmbeddingTest, BackwardMatchesCpuAndIsDeterministic) {
  using T = TypeParam;
  constexpr int P = Pack<T>::kSize;
  std::vector<std::pair<Case, std::vector<int32_t>>> cases;
  for (const Case& s : {Case{1, 1, 1, 1}, Case{3, 7, 5, 7}, Case{5, 33, 40, 33}, Case{2, 770, 1000, 8},
                        Case{2, 50, 70000, 5}, Case{4, 300, 3, 12}}) {
    cases.push_back({s, RandomTokens(s, 4)});
  }
  // Runs of 256 (summed directly) and 257 (in pieces), then a short one, shuffled.
  const Case edge{1, 600, 4, 4};
  std::vector<int32_t> edge_tokens(600, 2);
  for (int i = 0; i < 256; ++i) edge_tokens[i] = 0;
  for (int i = 256; i < 513; ++i) edge_tokens[i] = 1;
  engine::Rng rng(5);
  for (int i = 599; i > 0; --i) std::swap(edge_tokens[i], edge_tokens[rng.Next() % (i + 1)]);
  cases.push_back({edge, edge_tokens});

  for (const auto& [s, tokens] : cases) {
    const int64_t bt = s.b * s.t;
    const std::vector<float> dout = RandomValues<T>(bt * s.c, 6);
    const std::vector<float> dwte0 = engine::testing::RandomVec(s.v * s.c, 7);
    const std::vector<float> dwpe0 = engine::testing::RandomVec((s.t + 1) * s.c, 8);
    Tensor want_dwte = Tensor::FromVector({s.v, s.c}, dwte0), want_dwpe = Tensor::FromVector({s.t + 1, s.c}, dwpe0);
    Cpu<T>().EmbeddingBackward(Tensor::FromInts({s.b, s.t}, tokens), Tensor::FromVector({bt * s.c}, dout),
                               want_dwte, want_dwpe);
    // Per element of dwte: how many positions add to it, and the sum of |.| they add.
    std::vector<int64_t> occurrences(s.v, 0);
    std::vector<double> abs_sum(s.v * s.c, 0.0);
    for (int64_t i = 0; i < bt; ++i) {
      ++occurrences[tokens[i]];
      for (int64_t j = 0; j < s.c; ++j) abs_sum[tokens[i] * s.c + j] += std::fabs(dout[i * s.c + j]);
    }
    const std::vector<float> want = Values(want_dwte);
    const auto tol = [&](size_t e) {
      const int64_t n = occurrences[e / s.c];
      if (n <= embedding::kDirectRun) return 0.0;  // bitwise
      return 2.0 * (n + 1) * kF32Ulp * (abs_sum[e] + std::fabs(dwte0[e]));
    };
    const std::vector<T> sdout = Store<T>(dout);
    for (int k : Ks<T>(s.c)) {
      std::vector<float> first_dwte;
      for (const host_cuda::LaunchOptions& o : host_cuda::TestSchedules()) {
        SCOPED_TRACE(s.Name() + ", K " + std::to_string(k) + ", " + host_cuda::ToString(o));
        std::vector<float> dwte = dwte0, dwpe = dwpe0;
        if (k == 1) {
          RunBackward<1>(o, s, tokens, sdout, dwte, dwpe);
        } else {
          RunBackward<P>(o, s, tokens, sdout, dwte, dwpe);
        }
        EXPECT_TRUE(testing::Within(dwte, want, tol));
        EXPECT_TRUE(SameValues(dwpe, Values(want_dwpe)));
        if (first_dwte.empty()) {
          first_dwte = dwte;
        } else {
          EXPECT_TRUE(SameValues(dwte, first_dwte)) << "not deterministic";
        }
      }
    }
  }
}

TEST(EmbeddingTrapTest, TokenOutsideTheVocabularyTraps) {
  const Case s{1, 3, 5, 4};
  const std::vector<float> wte(s.v * s.c, 0.0f), wpe(s.t * s.c, 0.0f);
  for (int32_t bad : {5, -1}) {
    const std::vector<int32_t> tokens = {0, bad, 4};
    std::vector<float> out(s.t * s.c);
    const host_cuda::LaunchResult r =
        host_cuda::Launch(dim3(1), dim3(kThreads), 0, embedding::EmbeddingForwardKernel<1, float>, tokens.data(),
                          wte.data(), wpe.data(), s.t, s.t, s.v, s.c, out.data());
    EXPECT_FALSE(r.ok) << "token " << bad;
    EXPECT_NE(r.error.find("__trap"), std::string::npos) << r.error;
    // The backward's first sort pass checks the tokens before anything uses them.
    std::vector<int32_t> hist(embedding::kRadix);
    const host_cuda::LaunchResult rb =
        host_cuda::Launch(dim3(1), dim3(embedding::kSortThreads), 0, embedding::RadixHistogramKernel, tokens.data(),
                          s.t, 0, s.v, hist.data());
    EXPECT_FALSE(rb.ok) << "token " << bad;
    EXPECT_NE(rb.error.find("__trap"), std::string::npos) << rb.error;
  }
}

}  // namespace
}  // namespace ringmaster::kernels
