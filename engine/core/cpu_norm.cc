// CpuBackend: BatchNorm2d (batch statistics per call, running statistics for
// eval) and LayerNorm. Statistics accumulate in double; each channel (BN) or
// row (LN) is reduced by one thread in a fixed order, and LayerNorm's
// parameter gradients sum fixed blocks of rows, so results do not depend on
// the thread count. Parameter gradients are fp32 (not rounded), as autocast
// runs normalisation in fp32; dx and y are rounded to the compute dtype.

#include <cmath>
#include <vector>

#include "engine/core/check.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/cpu_kernels.h"

namespace ringmaster::engine {

using cpu::CheckF32;

namespace {

constexpr int64_t kLnBlockRows = 32;
constexpr int kLanes = 8;

// Sums over one plane with kLanes independent fp32 accumulators (vectorisable,
// fixed order); the callers add plane results in double.
float PlaneSum(const float* p, int64_t n) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += p[j + l];
  float s = 0.0f;
  for (; j < n; ++j) s += p[j];
  for (float a : acc) s += a;
  return s;
}

float PlaneSumSqDev(const float* p, int64_t n, float mean) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += (p[j + l] - mean) * (p[j + l] - mean);
  float s = 0.0f;
  for (; j < n; ++j) s += (p[j] - mean) * (p[j] - mean);
  for (float a : acc) s += a;
  return s;
}

// sum(g) and sum(g * (x - mean)) over one plane.
void PlaneGradSums(const float* x, const float* g, int64_t n, float mean, float* sum_g, float* sum_gx) {
  float a[kLanes] = {}, b[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      a[l] += g[j + l];
      b[l] += g[j + l] * (x[j + l] - mean);
    }
  float sa = 0.0f, sb = 0.0f;
  for (; j < n; ++j) {
    sa += g[j];
    sb += g[j] * (x[j] - mean);
  }
  for (int l = 0; l < kLanes; ++l) {
    sa += a[l];
    sb += b[l];
  }
  *sum_g = sa;
  *sum_gx = sb;
}

void CheckChannelVec(const Tensor& t, int64_t c, const char* what) {
  CheckF32(t, what);
  ENGINE_CHECK(t.numel() == c, "{} {} for {} channels", what, ShapeString(t.shape()), c);
}

}  // namespace

void CpuBackend::BatchNorm2dForwardTrain(const Tensor& x, const Tensor& gamma, const Tensor& beta, float momentum,
                                         float eps, const Tensor& running_mean, const Tensor& running_var,
                                         const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd) {
  CheckF32(x, "bn x");
  CheckF32(y, "bn y");
  ENGINE_CHECK(x.rank() == 4 && y.shape() == x.shape(), "bn x {} y {}", ShapeString(x.shape()), ShapeString(y.shape()));
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var, &save_mean, &save_invstd})
    CheckChannelVec(*t, c, "bn channel vector");
  const int64_t count = n * hw;
  ENGINE_CHECK(count > 1, "batch norm needs more than one value per channel");
  pool_.ParallelFor(c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += PlaneSum(x.f32() + (i * c + ch) * hw, hw);
      const double mean = sum / count;
      double sq = 0.0;
      for (int64_t i = 0; i < n; ++i) sq += PlaneSumSqDev(x.f32() + (i * c + ch) * hw, hw, static_cast<float>(mean));
      const double var = sq / count;
      const float invstd = static_cast<float>(1.0 / std::sqrt(var + eps));
      save_mean.f32()[ch] = static_cast<float>(mean);
      save_invstd.f32()[ch] = invstd;
      running_mean.f32()[ch] = (1.0f - momentum) * running_mean.f32()[ch] + momentum * static_cast<float>(mean);
      running_var.f32()[ch] =
          (1.0f - momentum) * running_var.f32()[ch] + momentum * static_cast<float>(sq / (count - 1));
      const float scale = gamma.f32()[ch] * invstd;
      const float shift = beta.f32()[ch] - static_cast<float>(mean) * scale;
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x.f32() + (i * c + ch) * hw;
        float* q = y.f32() + (i * c + ch) * hw;
        for (int64_t j = 0; j < hw; ++j) q[j] = p[j] * scale + shift;
        cpu::RoundBuffer(compute_dtype_, q, hw);
      }
    }
  });
}

void CpuBackend::BatchNorm2dForwardEval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                        const Tensor& running_mean, const Tensor& running_var, float eps,
                                        const Tensor& y) {
  CheckF32(x, "bn x");
  CheckF32(y, "bn y");
  ENGINE_CHECK(x.rank() == 4 && y.shape() == x.shape(), "bn x {} y {}", ShapeString(x.shape()), ShapeString(y.shape()));
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  for (const Tensor* t : {&gamma, &beta, &running_mean, &running_var}) CheckChannelVec(*t, c, "bn channel vector");
  pool_.ParallelFor(n * c, 4, [&](int64_t p0, int64_t p1) {
    for (int64_t plane = p0; plane < p1; ++plane) {
      const int64_t ch = plane % c;
      const float invstd = 1.0f / std::sqrt(running_var.f32()[ch] + eps);
      const float scale = gamma.f32()[ch] * invstd;
      const float shift = beta.f32()[ch] - running_mean.f32()[ch] * scale;
      const float* p = x.f32() + plane * hw;
      float* q = y.f32() + plane * hw;
      for (int64_t j = 0; j < hw; ++j) q[j] = p[j] * scale + shift;
      cpu::RoundBuffer(compute_dtype_, q, hw);
    }
  });
}

void CpuBackend::BatchNorm2dBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                                     const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma,
                                     const Tensor& dbeta) {
  CheckF32(x, "bn x");
  CheckF32(dy, "bn dy");
  CheckF32(dx, "bn dx");
  ENGINE_CHECK(x.rank() == 4 && dy.shape() == x.shape() && dx.shape() == x.shape(), "bn backward shapes");
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  for (const Tensor* t : {&gamma, &save_mean, &save_invstd, &dgamma, &dbeta})
    CheckChannelVec(*t, c, "bn channel vector");
  const int64_t count = n * hw;
  pool_.ParallelFor(c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      const float mean = save_mean.f32()[ch], invstd = save_invstd.f32()[ch];
      double sum_dy = 0.0, sum_dy_xhat = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        float sg, sgx;
        PlaneGradSums(x.f32() + (i * c + ch) * hw, dy.f32() + (i * c + ch) * hw, hw, mean, &sg, &sgx);
        sum_dy += sg;
        sum_dy_xhat += sgx;
      }
      sum_dy_xhat *= invstd;
      dbeta.f32()[ch] += static_cast<float>(sum_dy);
      dgamma.f32()[ch] += static_cast<float>(sum_dy_xhat);
      // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
      const float k = gamma.f32()[ch] * invstd;
      const float mean_dy = static_cast<float>(sum_dy / count);
      const float mean_dy_xhat = static_cast<float>(sum_dy_xhat / count);
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x.f32() + (i * c + ch) * hw;
        const float* g = dy.f32() + (i * c + ch) * hw;
        float* q = dx.f32() + (i * c + ch) * hw;
        for (int64_t j = 0; j < hw; ++j) q[j] = k * (g[j] - mean_dy - (p[j] - mean) * invstd * mean_dy_xhat);
        cpu::RoundBuffer(compute_dtype_, q, hw);
      }
    }
  });
}

void CpuBackend::LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& y,
                                  const Tensor& mean, const Tensor& rstd) {
  CheckF32(x, "ln x");
  CheckF32(y, "ln y");
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  ENGINE_CHECK(y.numel() == x.numel(), "ln y");
  CheckChannelVec(gamma, c, "ln gamma");
  CheckChannelVec(beta, c, "ln beta");
  CheckChannelVec(mean, rows, "ln mean");
  CheckChannelVec(rstd, rows, "ln rstd");
  pool_.ParallelFor(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* p = x.f32() + r * c;
      float* q = y.f32() + r * c;
      double sum = 0.0;
      for (int64_t j = 0; j < c; ++j) sum += p[j];
      const float m = static_cast<float>(sum / c);
      double sq = 0.0;
      for (int64_t j = 0; j < c; ++j) sq += (p[j] - m) * (p[j] - m);
      const float s = static_cast<float>(1.0 / std::sqrt(sq / c + eps));
      for (int64_t j = 0; j < c; ++j) q[j] = (p[j] - m) * s * gamma.f32()[j] + beta.f32()[j];
      cpu::RoundBuffer(compute_dtype_, q, c);
      mean.f32()[r] = m;
      rstd.f32()[r] = s;
    }
  });
}

void CpuBackend::LayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  CheckF32(x, "ln x");
  CheckF32(dy, "ln dy");
  CheckF32(dx, "ln dx");
  const int64_t c = x.dim(-1), rows = x.numel() / c;
  ENGINE_CHECK(dy.numel() == x.numel() && dx.numel() == x.numel(), "ln backward shapes");
  CheckChannelVec(gamma, c, "ln gamma");
  CheckChannelVec(dgamma, c, "ln dgamma");
  CheckChannelVec(dbeta, c, "ln dbeta");
  CheckChannelVec(mean, rows, "ln mean");
  CheckChannelVec(rstd, rows, "ln rstd");
  const int64_t blocks = (rows + kLnBlockRows - 1) / kLnBlockRows;
  // partial[block] = (dgamma[c], dbeta[c]) over that block's rows.
  std::vector<float> partial(blocks * 2 * c, 0.0f);
  pool_.ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      float* pg = partial.data() + blk * 2 * c;
      float* pb = pg + c;
      for (int64_t r = blk * kLnBlockRows; r < std::min(rows, (blk + 1) * kLnBlockRows); ++r) {
        const float* p = x.f32() + r * c;
        const float* g = dy.f32() + r * c;
        float* q = dx.f32() + r * c;
        const float m = mean.f32()[r], s = rstd.f32()[r];
        float sum_dn = 0.0f, sum_dn_xhat = 0.0f;  // dn = dy * gamma
        for (int64_t j = 0; j < c; ++j) {
          const float xhat = (p[j] - m) * s;
          const float dn = g[j] * gamma.f32()[j];
          sum_dn += dn;
          sum_dn_xhat += dn * xhat;
          pg[j] += g[j] * xhat;
          pb[j] += g[j];
        }
        const float mean_dn = sum_dn / c, mean_dn_xhat = sum_dn_xhat / c;
        for (int64_t j = 0; j < c; ++j) {
          const float xhat = (p[j] - m) * s;
          q[j] = s * (g[j] * gamma.f32()[j] - mean_dn - xhat * mean_dn_xhat);
        }
        cpu::RoundBuffer(compute_dtype_, q, c);
      }
    }
  });
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float* pg = partial.data() + blk * 2 * c;
    for (int64_t j = 0; j < c; ++j) {
      dgamma.f32()[j] += pg[j];
      dbeta.f32()[j] += pg[c + j];
    }
  }
}

}  // namespace ringmaster::engine
