// CpuBackend: conv2d (im2col + OpenBLAS GEMM per sample, samples spread over
// the pool) and max pooling.

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/core/check.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/cpu_kernels.h"

namespace ringmaster::engine {

using cpu::CheckF32;

namespace {

struct ConvDims {
  int64_t n, c, h, w, o, oh, ow;
  int64_t ckk() const { return c * kh * kw; }
  int64_t ohw() const { return oh * ow; }
  int64_t kh, kw;
};

ConvDims CheckConv(const Tensor& x, const Tensor& w, const Conv2dGeometry& g, const Tensor& y) {
  CheckF32(x, "conv x");
  CheckF32(w, "conv w");
  CheckF32(y, "conv y/dy");
  ENGINE_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4, "conv tensors must be rank 4");
  ConvDims d{x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0), 0, 0, g.kernel_h, g.kernel_w};
  d.oh = Conv2dGeometry::OutSize(d.h, g.kernel_h, g.stride_h, g.pad_h);
  d.ow = Conv2dGeometry::OutSize(d.w, g.kernel_w, g.stride_w, g.pad_w);
  ENGINE_CHECK(w.dim(1) == d.c && w.dim(2) == g.kernel_h && w.dim(3) == g.kernel_w, "conv w {} for x {}",
               ShapeString(w.shape()), ShapeString(x.shape()));
  ENGINE_CHECK(y.dim(0) == d.n && y.dim(1) == d.o && y.dim(2) == d.oh && y.dim(3) == d.ow, "conv y {} expected [{}, {}, {}, {}]",
               ShapeString(y.shape()), d.n, d.o, d.oh, d.ow);
  return d;
}

// Output columns [lo, hi) whose input column ow * sw - pw + j lies in [0, w).
inline void ValidRange(int64_t ow_count, int64_t w, int64_t sw, int64_t pw, int64_t j, int64_t* lo, int64_t* hi) {
  const int64_t first = pw - j;  // need ow * sw >= first
  *lo = first <= 0 ? 0 : (first + sw - 1) / sw;
  const int64_t limit = w + pw - j;  // need ow * sw < limit
  *hi = limit <= 0 ? 0 : std::min(ow_count, (limit + sw - 1) / sw);
  if (*lo > *hi) *lo = *hi;
}

// col[(c * kh + i) * kw + j][oh * OW + ow] = x[c][oh * sh - ph + i][ow * sw - pw + j] (0 outside).
void Im2Col(const float* x, const ConvDims& d, const Conv2dGeometry& g, float* col) {
  for (int64_t c = 0; c < d.c; ++c)
    for (int64_t i = 0; i < d.kh; ++i)
      for (int64_t j = 0; j < d.kw; ++j) {
        float* row = col + ((c * d.kh + i) * d.kw + j) * d.ohw();
        int64_t lo, hi;
        ValidRange(d.ow, d.w, g.stride_w, g.pad_w, j, &lo, &hi);
        for (int64_t oh = 0; oh < d.oh; ++oh) {
          float* dst = row + oh * d.ow;
          const int64_t ih = oh * g.stride_h - g.pad_h + i;
          if (ih < 0 || ih >= d.h) {
            std::memset(dst, 0, d.ow * sizeof(float));
            continue;
          }
          const float* src = x + (c * d.h + ih) * d.w - g.pad_w + j;  // src[ow * sw] is the input
          for (int64_t ow = 0; ow < lo; ++ow) dst[ow] = 0.0f;
          if (g.stride_w == 1) {
            std::memcpy(dst + lo, src + lo, (hi - lo) * sizeof(float));
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * g.stride_w];
          }
          for (int64_t ow = hi; ow < d.ow; ++ow) dst[ow] = 0.0f;
        }
      }
}

// The adjoint of Im2Col: dx[c][ih][iw] += col[...] (dx must be zeroed first).
void Col2Im(const float* col, const ConvDims& d, const Conv2dGeometry& g, float* dx) {
  for (int64_t c = 0; c < d.c; ++c)
    for (int64_t i = 0; i < d.kh; ++i)
      for (int64_t j = 0; j < d.kw; ++j) {
        const float* row = col + ((c * d.kh + i) * d.kw + j) * d.ohw();
        int64_t lo, hi;
        ValidRange(d.ow, d.w, g.stride_w, g.pad_w, j, &lo, &hi);
        for (int64_t oh = 0; oh < d.oh; ++oh) {
          const int64_t ih = oh * g.stride_h - g.pad_h + i;
          if (ih < 0 || ih >= d.h) continue;
          const float* src = row + oh * d.ow;
          float* dst = dx + (c * d.h + ih) * d.w - g.pad_w + j;
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.stride_w] += src[ow];
        }
      }
}

// Per-thread scratch reused across calls (a chunk runs on one thread).
std::vector<float>& Scratch(int which, size_t n) {
  thread_local std::vector<float> buffers[2];
  if (buffers[which].size() < n) buffers[which].resize(n);
  return buffers[which];
}

}  // namespace

void CpuBackend::Conv2dForward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dGeometry& g,
                               const Tensor& y) {
  const ConvDims d = CheckConv(x, w, g, y);
  if (bias != nullptr) {
    CheckF32(*bias, "conv bias");
    ENGINE_CHECK(bias->numel() == d.o, "conv bias {} for {} channels", ShapeString(bias->shape()), d.o);
  }
  Tensor rw = RoundedOperand(w);
  Tensor rbias;
  if (bias != nullptr) rbias = RoundedOperand(*bias);
  pool_.ParallelFor(d.n, 1, [&](int64_t n0, int64_t n1) {
    float* col = Scratch(0, d.ckk() * d.ohw()).data();
    for (int64_t n = n0; n < n1; ++n) {
      Im2Col(x.f32() + n * d.c * d.h * d.w, d, g, col);
      cpu::RoundBuffer(compute_dtype_, col, d.ckk() * d.ohw());
      float* yn = y.f32() + n * d.o * d.ohw();
      cpu::GemmArgs a;
      a.m = d.o;
      a.n = d.ohw();
      a.k = d.ckk();
      a.a = rw.f32();
      a.lda = d.ckk();
      a.b = col;
      a.ldb = d.ohw();
      a.c = yn;
      a.ldc = d.ohw();
      cpu::GemmSerial(a, DType::kF32);
      if (bias != nullptr)
        for (int64_t o = 0; o < d.o; ++o)
          for (int64_t p = 0; p < d.ohw(); ++p) yn[o * d.ohw() + p] += rbias.f32()[o];
      cpu::RoundBuffer(compute_dtype_, yn, d.o * d.ohw());
    }
  });
}

void CpuBackend::Conv2dBackward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dGeometry& g,
                                const Tensor* dx, const Tensor& dw, const Tensor* dbias) {
  const ConvDims d = CheckConv(x, w, g, dy);
  CheckF32(dw, "conv dw");
  ENGINE_CHECK(dw.numel() == w.numel(), "conv dw {}", ShapeString(dw.shape()));
  if (dx != nullptr) {
    CheckF32(*dx, "conv dx");
    ENGINE_CHECK(dx->shape() == x.shape(), "conv dx {}", ShapeString(dx->shape()));
  }
  if (dbias != nullptr) {
    CheckF32(*dbias, "conv dbias");
    ENGINE_CHECK(dbias->numel() == d.o, "conv dbias {}", ShapeString(dbias->shape()));
  }
  Tensor rw = RoundedOperand(w);
  const int chunks = pool_.NumChunks(d.n, 1);
  // Per-chunk partial weight/bias gradients, summed in chunk order below.
  std::vector<std::vector<float>> dw_part(chunks), db_part(chunks);
  pool_.ParallelForChunks(d.n, 1, [&](int chunk, int64_t n0, int64_t n1) {
    float* col = Scratch(0, d.ckk() * d.ohw()).data();
    float* dcol = Scratch(1, d.ckk() * d.ohw()).data();
    std::vector<float>& dwp = dw_part[chunk];
    std::vector<float>& dbp = db_part[chunk];
    dwp.assign(d.o * d.ckk(), 0.0f);
    dbp.assign(d.o, 0.0f);
    for (int64_t n = n0; n < n1; ++n) {
      const float* xn = x.f32() + n * d.c * d.h * d.w;
      const float* dyn = dy.f32() + n * d.o * d.ohw();
      Im2Col(xn, d, g, col);
      cpu::RoundBuffer(compute_dtype_, col, d.ckk() * d.ohw());
      cpu::GemmArgs gw;  // dW[o, ckk] += dy_n[o, ohw] @ col[ckk, ohw]^T
      gw.trans_b = true;
      gw.m = d.o;
      gw.n = d.ckk();
      gw.k = d.ohw();
      gw.a = dyn;
      gw.lda = d.ohw();
      gw.b = col;
      gw.ldb = d.ohw();
      gw.beta = 1.0f;
      gw.c = dwp.data();
      gw.ldc = d.ckk();
      cpu::GemmSerial(gw, DType::kF32);
      if (dbias != nullptr) {
        for (int64_t o = 0; o < d.o; ++o) {
          float s = 0.0f;
          for (int64_t p = 0; p < d.ohw(); ++p) s += dyn[o * d.ohw() + p];
          dbp[o] += s;
        }
      }
      if (dx != nullptr) {
        cpu::GemmArgs gx;  // dcol[ckk, ohw] = W[o, ckk]^T @ dy_n[o, ohw]
        gx.trans_a = true;
        gx.m = d.ckk();
        gx.n = d.ohw();
        gx.k = d.o;
        gx.a = rw.f32();
        gx.lda = d.ckk();
        gx.b = dyn;
        gx.ldb = d.ohw();
        gx.c = dcol;
        gx.ldc = d.ohw();
        cpu::GemmSerial(gx, DType::kF32);
        float* dxn = dx->f32() + n * d.c * d.h * d.w;
        std::memset(dxn, 0, d.c * d.h * d.w * sizeof(float));
        Col2Im(dcol, d, g, dxn);
        cpu::RoundBuffer(compute_dtype_, dxn, d.c * d.h * d.w);
      }
    }
  });
  for (int64_t i = 0; i < d.o * d.ckk(); ++i) {
    float s = 0.0f;
    for (int c = 0; c < chunks; ++c) s += dw_part[c][i];
    dw.f32()[i] += RoundTo(compute_dtype_, s);
  }
  if (dbias != nullptr) {
    for (int64_t o = 0; o < d.o; ++o) {
      float s = 0.0f;
      for (int c = 0; c < chunks; ++c) s += db_part[c][o];
      dbias->f32()[o] += RoundTo(compute_dtype_, s);
    }
  }
}

void CpuBackend::MaxPool2dForward(const Tensor& x, int64_t k, int64_t s, const Tensor& y) {
  CheckF32(x, "maxpool x");
  CheckF32(y, "maxpool y");
  ENGINE_CHECK(x.rank() == 4 && y.rank() == 4 && k >= 1 && s >= 1, "maxpool shapes");
  const int64_t h = x.dim(2), w = x.dim(3), oh = y.dim(2), ow = y.dim(3);
  ENGINE_CHECK(x.dim(0) == y.dim(0) && x.dim(1) == y.dim(1) && oh == (h - k) / s + 1 && ow == (w - k) / s + 1,
               "maxpool y {} for x {}", ShapeString(y.shape()), ShapeString(x.shape()));
  pool_.ParallelFor(x.dim(0) * x.dim(1), 4, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x.f32() + p * h * w;
      float* yp = y.f32() + p * oh * ow;
      if (k == 2 && s == 2) {  // the CNN's pooling: two rows at a time
        for (int64_t i = 0; i < oh; ++i) {
          const float* r0 = xp + 2 * i * w;
          const float* r1 = r0 + w;
          for (int64_t j = 0; j < ow; ++j)
            yp[i * ow + j] = std::max(std::max(r0[2 * j], r0[2 * j + 1]), std::max(r1[2 * j], r1[2 * j + 1]));
        }
        continue;
      }
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          float m = xp[(i * s) * w + j * s];
          for (int64_t a = 0; a < k; ++a)
            for (int64_t b = 0; b < k; ++b) m = std::max(m, xp[(i * s + a) * w + j * s + b]);
          yp[i * ow + j] = m;  // a max of rounded values needs no rounding
        }
    }
  });
}

void CpuBackend::MaxPool2dBackward(const Tensor& x, const Tensor& dy, int64_t k, int64_t s, const Tensor& dx) {
  CheckF32(x, "maxpool x");
  CheckF32(dy, "maxpool dy");
  CheckF32(dx, "maxpool dx");
  ENGINE_CHECK(dx.shape() == x.shape() && dy.rank() == 4, "maxpool backward shapes");
  const int64_t h = x.dim(2), w = x.dim(3), oh = dy.dim(2), ow = dy.dim(3);
  pool_.ParallelFor(x.dim(0) * x.dim(1), 4, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x.f32() + p * h * w;
      const float* dyp = dy.f32() + p * oh * ow;
      float* dxp = dx.f32() + p * h * w;
      std::memset(dxp, 0, h * w * sizeof(float));
      if (k == 2 && s == 2) {
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t base = 2 * i * w + 2 * j;
            const int64_t cand[4] = {base, base + 1, base + w, base + w + 1};
            int64_t best = cand[0];
            for (int q = 1; q < 4; ++q)
              if (xp[cand[q]] > xp[best]) best = cand[q];
            dxp[best] = dyp[i * ow + j];  // windows do not overlap
          }
        continue;
      }
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t best = (i * s) * w + j * s;
          for (int64_t a = 0; a < k; ++a)
            for (int64_t b = 0; b < k; ++b) {
              int64_t idx = (i * s + a) * w + j * s + b;
              if (xp[idx] > xp[best]) best = idx;  // the first maximum wins
            }
          dxp[best] += dyp[i * ow + j];
        }
      if (s < k) cpu::RoundBuffer(compute_dtype_, dxp, h * w);  // overlapping windows add
    }
  });
}

}  // namespace ringmaster::engine
