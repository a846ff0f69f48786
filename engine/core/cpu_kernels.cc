#include "engine/core/cpu_kernels.h"

#include <cblas.h>
#include <immintrin.h>

#include <cstring>
#include <vector>

namespace ringmaster::engine::cpu {
namespace {

void RoundBf16(float* x, int64_t n) {
  uint32_t* bits = reinterpret_cast<uint32_t*>(x);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = bits[i];
    bool nan = (b & 0x7fffffffu) > 0x7f800000u;
    uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
    bits[i] = nan ? ((b & 0xffff0000u) | 0x00400000u) : rounded;
  }
}

void RoundF16(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) x[i] = RoundTo(DType::kF16, x[i]);
}

}  // namespace

void RoundBuffer(DType dtype, float* x, int64_t n) {
  switch (dtype) {
    case DType::kBF16: RoundBf16(x, n); return;
    case DType::kF16: RoundF16(x, n); return;
    default: return;
  }
}

void GemmSerial(const GemmArgs& g, DType round) {
  if (g.m == 0 || g.n == 0) return;
  const bool round_new = round != DType::kF32;
  // The new part goes straight into C unless it must be rounded before beta*C is added.
  std::vector<float> scratch;
  float* out = g.c;
  int64_t ldo = g.ldc;
  float beta = g.beta;
  if (round_new && g.beta != 0.0f) {
    scratch.assign(g.m * g.n, 0.0f);
    out = scratch.data();
    ldo = g.n;
    beta = 0.0f;
  }
  if (g.k == 0) {
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) out[i * ldo + j] = beta == 0.0f ? 0.0f : beta * out[i * ldo + j];
  } else {
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), g.alpha, g.a,
                static_cast<blasint>(g.lda), g.b, static_cast<blasint>(g.ldb), beta, out,
                static_cast<blasint>(ldo));
  }
  for (int64_t i = 0; i < g.m; ++i) {
    float* row = out + i * ldo;
    if (g.bias != nullptr)
      for (int64_t j = 0; j < g.n; ++j) row[j] += g.bias[j];
    if (round_new) RoundBuffer(round, row, g.n);
  }
  if (out != g.c) {
    for (int64_t i = 0; i < g.m; ++i) {
      float* c = g.c + i * g.ldc;
      const float* s = out + i * ldo;
      for (int64_t j = 0; j < g.n; ++j) c[j] = g.beta * c[j] + s[j];
    }
  }
}

GemmArgs GemmRowBlock(const GemmArgs& g, int64_t m0, int64_t m1) {
  GemmArgs r = g;
  r.m = m1 - m0;
  r.a = g.trans_a ? g.a + m0 : g.a + m0 * g.lda;
  r.c = g.c + m0 * g.ldc;
  return r;
}

GemmArgs GemmColBlock(const GemmArgs& g, int64_t n0, int64_t n1) {
  GemmArgs r = g;
  r.n = n1 - n0;
  r.b = g.trans_b ? g.b + n0 * g.ldb : g.b + n0;
  r.c = g.c + n0;
  if (g.bias != nullptr) r.bias = g.bias + n0;
  return r;
}

}  // namespace ringmaster::engine::cpu
