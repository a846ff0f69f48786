// Flash attention on the CPU, loop for loop the CUDA kernels' algorithm:
// one "block" is one (batch, head, tile) and one "thread" one row of it.

#include "engine/core/flash_attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ringmaster::engine::ref {
namespace {

// Row pointers into the fused layouts for one (batch, head).
struct Head {
  int64_t b, t, c, nh, hd, bi, h;
  int64_t QkvRow(int64_t i) const { return (bi * t + i) * 3 * c + h * hd; }  // + c: k, + 2c: v
  int64_t OutRow(int64_t i) const { return (bi * t + i) * c + h * hd; }
  int64_t Stat(int64_t i) const { return (bi * nh + h) * t + i; }
};

float Dot(const float* x, const float* y, int64_t n) {
  float s = 0.0f;
  for (int64_t e = 0; e < n; ++e) s += x[e] * y[e];
  return s;
}

void ForwardBlock(const Head& hd, int64_t q0, const FlashTiles& tl, float scale, const std::vector<float>& qkv,
                  FlashForwardResult* r) {
  const int64_t q1 = std::min(q0 + tl.q_rows, hd.t);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t i = q0; i < q1; ++i) {
    const float* q = qkv.data() + hd.QkvRow(i);
    std::vector<float> o(hd.hd, 0.0f), s(tl.k_cols);
    float m = kNegInf, l = 0.0f;
    // Key tiles past the block's last query are skipped (causal).
    for (int64_t k0 = 0; k0 < q1; k0 += tl.k_cols) {
      const int64_t k1 = std::min(k0 + tl.k_cols, hd.t);
      float tile_max = kNegInf;
      for (int64_t j = k0; j < k1; ++j) {
        s[j - k0] = j <= i ? scale * Dot(q, qkv.data() + hd.QkvRow(j) + hd.c, hd.hd) : kNegInf;
        tile_max = std::max(tile_max, s[j - k0]);
      }
      const float m_new = std::max(m, tile_max);  // finite: key 0 is in the first tile
      const float corr = std::exp(m - m_new);
      l *= corr;
      for (float& x : o) x *= corr;
      for (int64_t j = k0; j < k1; ++j) {
        const float p = std::exp(s[j - k0] - m_new);
        l += p;
        const float* v = qkv.data() + hd.QkvRow(j) + 2 * hd.c;
        for (int64_t e = 0; e < hd.hd; ++e) o[e] += p * v[e];
      }
      m = m_new;
    }
    for (int64_t e = 0; e < hd.hd; ++e) r->out[hd.OutRow(i) + e] = o[e] / l;
    r->lse[hd.Stat(i)] = m + std::log(l);
  }
}

// P_ij recomputed from the logsumexp; dS_ij = P_ij (dO_i . v_j - D_i).
struct Recompute {
  const Head& hd;
  const std::vector<float>& qkv;
  const std::vector<float>& dout;
  const std::vector<float>& lse;
  const std::vector<float>& dsum;
  float scale;
  void At(int64_t i, int64_t j, float* p, float* ds) const {
    const float* q = qkv.data() + hd.QkvRow(i);
    const float* dq_o = dout.data() + hd.OutRow(i);
    *p = std::exp(scale * Dot(q, qkv.data() + hd.QkvRow(j) + hd.c, hd.hd) - lse[hd.Stat(i)]);
    *ds = *p * (Dot(dq_o, qkv.data() + hd.QkvRow(j) + 2 * hd.c, hd.hd) - dsum[hd.Stat(i)]);
  }
};

// dK, dV of the key rows [k0, k0 + kv_rows): query tiles from k0 on (earlier queries see none of these keys).
void KeyValueBlock(const Recompute& rc, int64_t k0, const FlashTiles& tl, std::vector<float>* dqkv) {
  const Head& hd = rc.hd;
  const int64_t k1 = std::min(k0 + tl.kv_rows, hd.t);
  for (int64_t j = k0; j < k1; ++j) {
    float* dk = dqkv->data() + hd.QkvRow(j) + hd.c;
    float* dv = dk + hd.c;
    std::fill(dk, dk + hd.hd, 0.0f);
    std::fill(dv, dv + hd.hd, 0.0f);
    for (int64_t s0 = k0; s0 < hd.t; s0 += tl.kv_stream) {
      for (int64_t i = std::max(s0, j); i < std::min(s0 + tl.kv_stream, hd.t); ++i) {
        float p, ds;
        rc.At(i, j, &p, &ds);
        const float* q = rc.qkv.data() + hd.QkvRow(i);
        const float* dov = rc.dout.data() + hd.OutRow(i);
        for (int64_t e = 0; e < hd.hd; ++e) {
          dv[e] += p * dov[e];
          dk[e] += rc.scale * ds * q[e];
        }
      }
    }
  }
}

// dQ of the query rows [q0, q0 + q_rows): key tiles up to the block's last query.
void QueryBlock(const Recompute& rc, int64_t q0, const FlashTiles& tl, std::vector<float>* dqkv) {
  const Head& hd = rc.hd;
  const int64_t q1 = std::min(q0 + tl.q_rows, hd.t);
  for (int64_t i = q0; i < q1; ++i) {
    float* dq = dqkv->data() + hd.QkvRow(i);
    std::fill(dq, dq + hd.hd, 0.0f);
    for (int64_t k0 = 0; k0 < q1; k0 += tl.dq_cols) {
      for (int64_t j = k0; j < std::min({k0 + tl.dq_cols, hd.t, i + 1}); ++j) {
        float p, ds;
        rc.At(i, j, &p, &ds);
        const float* k = rc.qkv.data() + hd.QkvRow(j) + hd.c;
        for (int64_t e = 0; e < hd.hd; ++e) dq[e] += rc.scale * ds * k[e];
      }
    }
  }
}

}  // namespace

FlashForwardResult FlashAttentionForward(int64_t b, int64_t t, int64_t c, int64_t nh, const std::vector<float>& qkv,
                                         const FlashTiles& tiles) {
  FlashForwardResult r{std::vector<float>(b * t * c), std::vector<float>(b * nh * t)};
  const int64_t hs = c / nh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t q0 = 0; q0 < t; q0 += tiles.q_rows)
        ForwardBlock(Head{b, t, c, nh, hs, bi, h}, q0, tiles, scale, qkv, &r);
  return r;
}

std::vector<float> FlashAttentionBackward(int64_t b, int64_t t, int64_t c, int64_t nh, const std::vector<float>& qkv,
                                          const std::vector<float>& out, const std::vector<float>& lse,
                                          const std::vector<float>& dout, const FlashTiles& tiles) {
  std::vector<float> dqkv(qkv.size()), dsum(b * nh * t);
  const int64_t hs = c / nh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t h = 0; h < nh; ++h) {
      const Head hd{b, t, c, nh, hs, bi, h};
      for (int64_t i = 0; i < t; ++i)  // D_i = dO_i . O_i
        dsum[hd.Stat(i)] = Dot(dout.data() + hd.OutRow(i), out.data() + hd.OutRow(i), hs);
      const Recompute rc{hd, qkv, dout, lse, dsum, scale};
      for (int64_t k0 = 0; k0 < t; k0 += tiles.kv_rows) KeyValueBlock(rc, k0, tiles, &dqkv);
      for (int64_t q0 = 0; q0 < t; q0 += tiles.q_rows) QueryBlock(rc, q0, tiles, &dqkv);
    }
  }
  return dqkv;
}

}  // namespace ringmaster::engine::ref
