// CpuBackend: ReLU, GELU (tanh approximation) and dropout.

#include <cmath>

#include "engine/core/check.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/cpu_kernels.h"
#include "engine/core/random.h"

namespace ringmaster::engine {

using cpu::CheckF32;
using cpu::CheckSameNumel;

namespace {
constexpr int64_t kGrain = 1 << 14;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;
}  // namespace

void CpuBackend::ReluForward(const Tensor& x, const Tensor& y) {
  CheckF32(x, "Relu x");
  CheckF32(y, "Relu y");
  CheckSameNumel(x, y, "Relu");
  const float* xp = x.f32();
  float* yp = y.f32();
  pool_.ParallelFor(x.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) yp[i] = xp[i] > 0.0f ? xp[i] : 0.0f;
    cpu::RoundBuffer(compute_dtype_, yp + b, e - b);
  });
}

void CpuBackend::ReluBackward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  CheckF32(y, "ReluBackward y");
  CheckF32(dy, "ReluBackward dy");
  CheckF32(dx, "ReluBackward dx");
  CheckSameNumel(y, dy, "ReluBackward");
  CheckSameNumel(y, dx, "ReluBackward");
  const float* yp = y.f32();
  const float* dyp = dy.f32();
  float* dxp = dx.f32();
  // Masking a rounded value needs no rounding.
  pool_.ParallelFor(y.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dxp[i] = yp[i] > 0.0f ? dyp[i] : 0.0f;
  });
}

void CpuBackend::GeluForward(const Tensor& x, const Tensor& y) {
  CheckF32(x, "Gelu x");
  CheckF32(y, "Gelu y");
  CheckSameNumel(x, y, "Gelu");
  const float* xp = x.f32();
  float* yp = y.f32();
  pool_.ParallelFor(x.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float v = xp[i];
      float u = kGeluScale * (v + kGeluCubic * v * v * v);
      yp[i] = 0.5f * v * (1.0f + std::tanh(u));
    }
    cpu::RoundBuffer(compute_dtype_, yp + b, e - b);
  });
}

void CpuBackend::GeluBackward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  CheckF32(x, "GeluBackward x");
  CheckF32(dy, "GeluBackward dy");
  CheckF32(dx, "GeluBackward dx");
  CheckSameNumel(x, dy, "GeluBackward");
  CheckSameNumel(x, dx, "GeluBackward");
  const float* xp = x.f32();
  const float* dyp = dy.f32();
  float* dxp = dx.f32();
  pool_.ParallelFor(x.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float v = xp[i];
      float u = kGeluScale * (v + kGeluCubic * v * v * v);
      float t = std::tanh(u);
      float sech2 = 1.0f - t * t;
      float local = 0.5f * (1.0f + t) + 0.5f * v * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
      dxp[i] = local * dyp[i];
    }
    cpu::RoundBuffer(compute_dtype_, dxp + b, e - b);
  });
}

void CpuBackend::DropoutForward(const Tensor& x, float p, uint64_t key, const Tensor& mask, const Tensor& y) {
  CheckF32(x, "Dropout x");
  CheckF32(mask, "Dropout mask");
  CheckF32(y, "Dropout y");
  CheckSameNumel(x, mask, "Dropout");
  CheckSameNumel(x, y, "Dropout");
  ENGINE_CHECK(p >= 0.0f && p < 1.0f, "dropout p = {}", p);
  const float keep_scale = 1.0f / (1.0f - p);
  const float* xp = x.f32();
  float* mp = mask.f32();
  float* yp = y.f32();
  pool_.ParallelFor(x.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      mp[i] = HashUniform(key, static_cast<uint64_t>(i)) >= p ? keep_scale : 0.0f;
      yp[i] = xp[i] * mp[i];
    }
    cpu::RoundBuffer(compute_dtype_, yp + b, e - b);
  });
}

void CpuBackend::DropoutBackward(const Tensor& dy, const Tensor& mask, const Tensor& dx) {
  CheckF32(dy, "DropoutBackward dy");
  CheckF32(mask, "DropoutBackward mask");
  CheckF32(dx, "DropoutBackward dx");
  CheckSameNumel(dy, mask, "DropoutBackward");
  CheckSameNumel(dy, dx, "DropoutBackward");
  const float* dyp = dy.f32();
  const float* mp = mask.f32();
  float* dxp = dx.f32();
  pool_.ParallelFor(dy.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dxp[i] = dyp[i] * mp[i];
    cpu::RoundBuffer(compute_dtype_, dxp + b, e - b);
  });
}

}  // namespace ringmaster::engine
