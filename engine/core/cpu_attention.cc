// CpuBackend: causal multi-head self-attention on GPT-2's fused qkv layout.
// Each (batch, head) pair is one unit of work: two OpenBLAS GEMMs around a
// causal softmax. Units write disjoint memory, so results are reproducible.

#include <cmath>
#include <vector>

#include "engine/core/check.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/cpu_kernels.h"

namespace ringmaster::engine {

using cpu::CheckF32;

namespace {

struct AttnDims {
  int64_t b, t, c, nh, hd;
};

AttnDims CheckAttn(const Tensor& qkv, int64_t n_head, const Tensor& att) {
  CheckF32(qkv, "qkv");
  CheckF32(att, "att");
  ENGINE_CHECK(qkv.rank() == 3 && qkv.dim(2) % 3 == 0, "qkv must be [B, T, 3C], got {}", ShapeString(qkv.shape()));
  AttnDims d{qkv.dim(0), qkv.dim(1), qkv.dim(2) / 3, n_head, 0};
  ENGINE_CHECK(n_head > 0 && d.c % n_head == 0, "C = {} not divisible by n_head = {}", d.c, n_head);
  d.hd = d.c / n_head;
  ENGINE_CHECK(att.numel() == d.b * d.nh * d.t * d.t, "att {} for B={} H={} T={}", ShapeString(att.shape()), d.b,
               d.nh, d.t);
  return d;
}

}  // namespace

Shape CpuBackend::AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t /*head_size*/) const {
  return {B, n_head, T, T};
}

void CpuBackend::AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& att, const Tensor& out) {
  const AttnDims d = CheckAttn(qkv, n_head, att);
  CheckF32(out, "attention out");
  ENGINE_CHECK(out.numel() == d.b * d.t * d.c, "attention out {}", ShapeString(out.shape()));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hd));
  pool_.ParallelFor(d.b * d.nh, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bi = u / d.nh, h = u % d.nh;
      const float* q = qkv.f32() + bi * d.t * 3 * d.c + h * d.hd;
      const float* k = q + d.c;
      const float* v = q + 2 * d.c;
      float* p = att.f32() + u * d.t * d.t;
      cpu::GemmArgs s;  // p = scale * q @ k^T  [T, T]
      s.trans_b = true;
      s.m = d.t;
      s.n = d.t;
      s.k = d.hd;
      s.alpha = scale;
      s.a = q;
      s.lda = 3 * d.c;
      s.b = k;
      s.ldb = 3 * d.c;
      s.c = p;
      s.ldc = d.t;
      cpu::GemmSerial(s, DType::kF32);
      for (int64_t i = 0; i < d.t; ++i) {
        float* row = p + i * d.t;
        float mx = row[0];
        for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        float sum = 0.0f;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < d.t; ++j) row[j] = 0.0f;
        cpu::RoundBuffer(compute_dtype_, row, i + 1);
      }
      cpu::GemmArgs o;  // out_h = p @ v  [T, hd]
      o.m = d.t;
      o.n = d.hd;
      o.k = d.t;
      o.a = p;
      o.lda = d.t;
      o.b = v;
      o.ldb = 3 * d.c;
      o.c = out.f32() + bi * d.t * d.c + h * d.hd;
      o.ldc = d.c;
      cpu::GemmSerial(o, compute_dtype_);
    }
  });
}

void CpuBackend::AttentionBackward(const Tensor& qkv, const Tensor& att, const Tensor& /*out*/, const Tensor& dout,
                                   int64_t n_head, const Tensor& dqkv) {
  const AttnDims d = CheckAttn(qkv, n_head, att);
  CheckF32(dout, "attention dout");
  CheckF32(dqkv, "dqkv");
  ENGINE_CHECK(dout.numel() == d.b * d.t * d.c && dqkv.numel() == qkv.numel(), "attention backward shapes");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.hd));
  pool_.ParallelFor(d.b * d.nh, 1, [&](int64_t u0, int64_t u1) {
    std::vector<float> dp(d.t * d.t);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t bi = u / d.nh, h = u % d.nh;
      const int64_t base = bi * d.t * 3 * d.c + h * d.hd;
      const float* q = qkv.f32() + base;
      const float* k = q + d.c;
      const float* v = q + 2 * d.c;
      float* dq = dqkv.f32() + base;
      float* dk = dq + d.c;
      float* dv = dq + 2 * d.c;
      const float* p = att.f32() + u * d.t * d.t;
      const float* dov = dout.f32() + bi * d.t * d.c + h * d.hd;
      cpu::GemmArgs g1;  // dp = dout_h @ v^T  [T, T]
      g1.trans_b = true;
      g1.m = d.t;
      g1.n = d.t;
      g1.k = d.hd;
      g1.a = dov;
      g1.lda = d.c;
      g1.b = v;
      g1.ldb = 3 * d.c;
      g1.c = dp.data();
      g1.ldc = d.t;
      cpu::GemmSerial(g1, DType::kF32);
      cpu::GemmArgs g2;  // dv = p^T @ dout_h  [T, hd]
      g2.trans_a = true;
      g2.m = d.t;
      g2.n = d.hd;
      g2.k = d.t;
      g2.a = p;
      g2.lda = d.t;
      g2.b = dov;
      g2.ldb = d.c;
      g2.c = dv;
      g2.ldc = 3 * d.c;
      cpu::GemmSerial(g2, compute_dtype_);
      // ds = scale * p * (dp - sum_j p dp), in place in dp (zero above the diagonal).
      for (int64_t i = 0; i < d.t; ++i) {
        const float* pr = p + i * d.t;
        float* r = dp.data() + i * d.t;
        float dot = 0.0f;
        for (int64_t j = 0; j <= i; ++j) dot += pr[j] * r[j];
        for (int64_t j = 0; j <= i; ++j) r[j] = scale * pr[j] * (r[j] - dot);
        for (int64_t j = i + 1; j < d.t; ++j) r[j] = 0.0f;
        cpu::RoundBuffer(compute_dtype_, r, i + 1);
      }
      cpu::GemmArgs g3;  // dq = ds @ k  [T, hd]
      g3.m = d.t;
      g3.n = d.hd;
      g3.k = d.t;
      g3.a = dp.data();
      g3.lda = d.t;
      g3.b = k;
      g3.ldb = 3 * d.c;
      g3.c = dq;
      g3.ldc = 3 * d.c;
      cpu::GemmSerial(g3, compute_dtype_);
      cpu::GemmArgs g4;  // dk = ds^T @ q  [T, hd]
      g4.trans_a = true;
      g4.m = d.t;
      g4.n = d.hd;
      g4.k = d.t;
      g4.a = dp.data();
      g4.lda = d.t;
      g4.b = q;
      g4.ldb = 3 * d.c;
      g4.c = dk;
      g4.ldc = 3 * d.c;
      cpu::GemmSerial(g4, compute_dtype_);
    }
  });
}

}  // namespace ringmaster::engine
