// The flash algorithm (tiles, causal skipping, online rescaling, backward
// recomputation from the logsumexp) against the naive reference attention.

#include "engine/core/flash_attention_reference.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/reference_ops.h"
#include "engine/core/test_util.h"

namespace ringmaster::engine {
namespace {

using testing::MaxRelDiff;
using testing::RandomTensor;

struct Case {
  int64_t b, t, nh, hd;
  ref::FlashTiles tiles;
};

// log sum_{j <= i} exp(scale * q_i . k_j), straight from the definition.
std::vector<float> NaiveLse(int64_t b, int64_t t, int64_t c, int64_t nh, const std::vector<float>& qkv) {
  const int64_t hd = c / nh;
  std::vector<float> lse(b * nh * t);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < t; ++i) {
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0.0;
          for (int64_t e = 0; e < hd; ++e)
            s += double{qkv[(bi * t + i) * 3 * c + h * hd + e]} * qkv[(bi * t + j) * 3 * c + c + h * hd + e];
          sum += std::exp(s / std::sqrt(static_cast<double>(hd)));
        }
        lse[(bi * nh + h) * t + i] = static_cast<float>(std::log(sum));
      }
  return lse;
}

TEST(FlashAttentionReferenceTest, MatchesNaiveAttentionForwardAndBackward) {
  const Case cases[] = {
      {2, 37, 3, 8, {8, 5, 8, 3, 6}},    // T a multiple of no tile; B * H = 6
      {1, 1, 2, 16, {}},                 // T = 1
      {1, 64, 1, 64, {}},                // the CUDA tiles, exactly one query block
      {2, 100, 2, 32, {}},               // the CUDA tiles, partial last blocks
      {1, 50, 2, 4, {7, 16, 5, 9, 11}},  // key tiles wider than query tiles
  };
  uint64_t seed = 30;
  for (const Case& k : cases) {
    const int64_t c = k.nh * k.hd;
    // Scores of several units: the online rescaling is exercised, not just sums near uniform.
    const std::vector<float> qkv = RandomTensor({k.b, k.t, 3 * c}, ++seed, -2.0f, 2.0f).ToVector();
    const std::vector<float> dout = RandomTensor({k.b, k.t, c}, ++seed).ToVector();
    SCOPED_TRACE(::testing::Message() << "b=" << k.b << " t=" << k.t << " nh=" << k.nh << " hd=" << k.hd);
    const ref::FlashForwardResult f = ref::FlashAttentionForward(k.b, k.t, c, k.nh, qkv, k.tiles);
    EXPECT_LT(MaxRelDiff(f.out, ref::Attention(k.b, k.t, c, k.nh, qkv)), 1e-5);
    EXPECT_LT(MaxRelDiff(f.lse, NaiveLse(k.b, k.t, c, k.nh, qkv)), 1e-5);
    const std::vector<float> dqkv = ref::FlashAttentionBackward(k.b, k.t, c, k.nh, qkv, f.out, f.lse, dout, k.tiles);
    EXPECT_LT(MaxRelDiff(dqkv, ref::AttentionBackward(k.b, k.t, c, k.nh, qkv, dout)), 1e-4);
  }
}

TEST(FlashAttentionReferenceTest, LargeScoresDoNotOverflow) {
  // Scores near 100 (beyond fp32 exp's 88): exp without the running max would overflow fp32.
  const int64_t b = 1, t = 40, nh = 1, hd = 4, c = nh * hd;
  std::vector<float> qkv = RandomTensor({b, t, 3 * c}, 7, 6.0f, 8.0f).ToVector();
  const ref::FlashTiles tiles{16, 8, 16, 8};
  const ref::FlashForwardResult f = ref::FlashAttentionForward(b, t, c, nh, qkv, tiles);
  for (float x : f.out) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(MaxRelDiff(f.out, ref::Attention(b, t, c, nh, qkv)), 1e-5);
  const std::vector<float> dout = RandomTensor({b, t, c}, 8).ToVector();
  EXPECT_LT(MaxRelDiff(ref::FlashAttentionBackward(b, t, c, nh, qkv, f.out, f.lse, dout, tiles),
                       ref::AttentionBackward(b, t, c, nh, qkv, dout)),
            1e-3);
}

}  // namespace
}  // namespace ringmaster::engine
