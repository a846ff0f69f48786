// CpuBackend: GEMM, batched GEMM and the bias-gradient reduction.

#include <vector>

#include "engine/core/check.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/cpu_kernels.h"

namespace ringmaster::engine {

using cpu::CheckF32;

namespace {

// Below this many multiply-adds a GEMM runs on the calling thread.
constexpr int64_t kParallelGemmWork = 1 << 18;
// Column/row blocks handed to threads are multiples of this (SIMD friendly).
constexpr int64_t kGemmBlock = 16;
// Rows per partial sum in BiasGrad: fixed, so the result does not depend on threads.
constexpr int64_t kReduceRows = 64;

struct MatDims {
  int64_t rows, cols;
};

MatDims As2D(const Tensor& t) {
  ENGINE_CHECK(t.rank() >= 1, "GEMM operand of rank 0");
  int64_t cols = t.dim(-1);
  return {cols == 0 ? 0 : t.numel() / cols, cols};
}

}  // namespace

void CpuBackend::Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                      const Tensor& c, const Tensor* bias) {
  CheckF32(a, "Gemm a");
  CheckF32(b, "Gemm b");
  CheckF32(c, "Gemm c");
  MatDims ad = As2D(a), bd = As2D(b);
  cpu::GemmArgs g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = trans_a ? ad.cols : ad.rows;
  g.k = trans_a ? ad.rows : ad.cols;
  const int64_t kb = trans_b ? bd.cols : bd.rows;
  g.n = trans_b ? bd.rows : bd.cols;
  ENGINE_CHECK(g.k == kb, "Gemm inner dims: a {} (trans {}) b {} (trans {})", ShapeString(a.shape()), trans_a,
               ShapeString(b.shape()), trans_b);
  ENGINE_CHECK(c.numel() == g.m * g.n && (g.n == 0 || c.dim(-1) == g.n), "Gemm c {} for [{}, {}]",
               ShapeString(c.shape()), g.m, g.n);
  if (bias != nullptr) {
    CheckF32(*bias, "Gemm bias");
    ENGINE_CHECK(bias->numel() == g.n, "Gemm bias {} for N = {}", ShapeString(bias->shape()), g.n);
  }
  Tensor ra = RoundedOperand(a), rb = RoundedOperand(b);
  Tensor rbias;
  if (bias != nullptr) rbias = RoundedOperand(*bias);
  g.alpha = alpha;
  g.beta = beta;
  g.a = ra.f32();
  g.lda = ad.cols;
  g.b = rb.f32();
  g.ldb = bd.cols;
  g.c = c.f32();
  g.ldc = g.n;
  g.bias = bias != nullptr ? rbias.f32() : nullptr;

  const bool split_cols = g.n >= g.m;
  const int64_t extent = split_cols ? g.n : g.m;
  const int64_t blocks = (extent + kGemmBlock - 1) / kGemmBlock;
  if (pool_.num_threads() == 1 || g.m * g.n * g.k < kParallelGemmWork || blocks < 2) {
    cpu::GemmSerial(g, compute_dtype_);
    return;
  }
  pool_.ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    int64_t lo = b0 * kGemmBlock, hi = std::min(extent, b1 * kGemmBlock);
    cpu::GemmSerial(split_cols ? cpu::GemmColBlock(g, lo, hi) : cpu::GemmRowBlock(g, lo, hi), compute_dtype_);
  });
}

void CpuBackend::GemmBatched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                             const Tensor& c) {
  CheckF32(a, "GemmBatched a");
  CheckF32(b, "GemmBatched b");
  CheckF32(c, "GemmBatched c");
  ENGINE_CHECK(a.rank() == 3 && b.rank() == 3 && c.rank() == 3, "GemmBatched needs rank-3 tensors");
  const int64_t batch = a.dim(0);
  ENGINE_CHECK(b.dim(0) == batch && c.dim(0) == batch, "GemmBatched batch sizes differ");
  cpu::GemmArgs g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = trans_a ? a.dim(2) : a.dim(1);
  g.k = trans_a ? a.dim(1) : a.dim(2);
  g.n = trans_b ? b.dim(1) : b.dim(2);
  ENGINE_CHECK((trans_b ? b.dim(2) : b.dim(1)) == g.k, "GemmBatched inner dims");
  ENGINE_CHECK(c.dim(1) == g.m && c.dim(2) == g.n, "GemmBatched c {}", ShapeString(c.shape()));
  Tensor ra = RoundedOperand(a), rb = RoundedOperand(b);
  g.alpha = alpha;
  g.beta = beta;
  g.lda = a.dim(2);
  g.ldb = b.dim(2);
  g.ldc = g.n;
  const int64_t sa = a.dim(1) * a.dim(2), sb = b.dim(1) * b.dim(2), sc = g.m * g.n;
  pool_.ParallelFor(batch, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      cpu::GemmArgs gi = g;
      gi.a = ra.f32() + i * sa;
      gi.b = rb.f32() + i * sb;
      gi.c = c.f32() + i * sc;
      cpu::GemmSerial(gi, compute_dtype_);
    }
  });
}

void CpuBackend::BiasGrad(const Tensor& dy, const Tensor& dbias) {
  CheckF32(dy, "BiasGrad dy");
  CheckF32(dbias, "BiasGrad dbias");
  const int64_t n = dy.dim(-1);
  const int64_t m = n == 0 ? 0 : dy.numel() / n;
  ENGINE_CHECK(dbias.numel() == n, "BiasGrad dbias {} for dy {}", ShapeString(dbias.shape()), ShapeString(dy.shape()));
  const int64_t blocks = (m + kReduceRows - 1) / kReduceRows;
  std::vector<float> partial(blocks * n, 0.0f);
  const float* d = dy.f32();
  pool_.ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      float* p = partial.data() + blk * n;
      for (int64_t i = blk * kReduceRows; i < std::min(m, (blk + 1) * kReduceRows); ++i)
        for (int64_t j = 0; j < n; ++j) p[j] += d[i * n + j];
    }
  });
  float* out = dbias.f32();
  for (int64_t j = 0; j < n; ++j) {
    float s = 0.0f;
    for (int64_t blk = 0; blk < blocks; ++blk) s += partial[blk * n + j];
    out[j] += RoundTo(compute_dtype_, s);
  }
}

}  // namespace ringmaster::engine
