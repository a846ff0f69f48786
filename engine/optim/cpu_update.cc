#include "engine/optim/cpu_update.h"

#include <cmath>
#include <cstring>

// Loops are written so GCC vectorises them at -O3 -mavx2 -mfma (see BUILD):
// __restrict pointers, no branches on data, loop-invariant choices hoisted.
// Reductions keep 8 explicit lanes so that the summation order is fixed
// without -ffast-math.

namespace ringmaster::engine::optim {
namespace {

constexpr int kLanes = 8;

// Adam-family bias corrections 1 - beta^step, computed in fp64 (as PyTorch
// does on the host) and rounded once.
double BiasCorrection(double beta, int64_t step) { return 1.0 - std::pow(beta, static_cast<double>(step)); }

// The LAMB moments and update for one element; shared by both passes so that
// the second recomputes exactly what the first measured.
struct LambConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, bc1, bc2, eps, weight_decay, grad_scale;
};

LambConstants MakeLambConstants(const LambArgs& a) {
  return {static_cast<float>(a.beta1),
          static_cast<float>(1.0 - a.beta1),
          static_cast<float>(a.beta2),
          static_cast<float>(1.0 - a.beta2),
          static_cast<float>(BiasCorrection(a.beta1, a.step)),
          static_cast<float>(BiasCorrection(a.beta2, a.step)),
          a.eps,
          a.weight_decay,
          a.grad_scale};
}

inline float LambElement(const LambConstants& c, float w, float grad, float& m, float& v) {
  const float g = c.grad_scale * grad;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  return (m / c.bc1) / (std::sqrt(v / c.bc2) + c.eps) + c.weight_decay * w;
}

}  // namespace

double SumSquares(const float* __restrict x, int64_t n) {
  double lanes[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const double xi = x[i + k];
      lanes[k] += xi * xi;
    }
  }
  for (int k = 0; i < n; ++i, ++k) {
    const double xi = x[i];
    lanes[k] += xi * xi;
  }
  double sum = 0.0;
  for (int k = 0; k < kLanes; ++k) sum += lanes[k];
  return sum;
}

bool AllFinite(const float* __restrict x, int64_t n) {
  // A float is inf or NaN exactly when its exponent bits are all ones.
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    bad |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  return bad == 0;
}

void ScaleInPlace(float* __restrict x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

void SgdUpdate(float* __restrict w, const float* __restrict grad, float* __restrict buf, int64_t n, const SgdArgs& a) {
  const float lr = a.lr, mu = a.momentum, wd = a.weight_decay, s = a.grad_scale;
  if (mu == 0.0f) {
    for (int64_t i = 0; i < n; ++i) {
      const float g = s * grad[i] + wd * w[i];
      w[i] -= lr * g;
    }
  } else if (a.nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const float g = s * grad[i] + wd * w[i];
      const float b = mu * buf[i] + g;
      buf[i] = b;
      w[i] -= lr * (g + mu * b);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float g = s * grad[i] + wd * w[i];
      const float b = mu * buf[i] + g;
      buf[i] = b;
      w[i] -= lr * b;
    }
  }
}

void AdamWUpdate(float* __restrict w, const float* __restrict grad, float* __restrict m, float* __restrict v, int64_t n,
                 const AdamWArgs& a) {
  const float decay = static_cast<float>(1.0 - static_cast<double>(a.lr) * a.weight_decay);
  const float b1 = static_cast<float>(a.beta1), one_minus_b1 = static_cast<float>(1.0 - a.beta1);
  const float b2 = static_cast<float>(a.beta2), one_minus_b2 = static_cast<float>(1.0 - a.beta2);
  const float step_size = static_cast<float>(a.lr / BiasCorrection(a.beta1, a.step));
  const float bc2_sqrt = static_cast<float>(std::sqrt(BiasCorrection(a.beta2, a.step)));
  const float eps = a.eps, s = a.grad_scale;
  for (int64_t i = 0; i < n; ++i) {
    const float g = s * grad[i];
    const float mi = b1 * m[i] + one_minus_b1 * g;
    const float vi = b2 * v[i] + one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    w[i] = w[i] * decay - step_size * (mi / denom);
  }
}

void LarsUpdate(float* __restrict w, const float* __restrict grad, float* __restrict buf, int64_t n,
                const LarsArgs& a) {
  const float lr = a.lr, mu = a.momentum, wd = a.weight_decay, trust = a.trust_ratio, s = a.grad_scale;
  if (mu == 0.0f) {
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * (trust * (s * grad[i] + wd * w[i]));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float d = trust * (s * grad[i] + wd * w[i]);
    const float b = mu * buf[i] + d;
    buf[i] = b;
    w[i] -= lr * b;
  }
}

float LarsTrustRatio(double w_norm, double g_norm, float eta, float weight_decay) {
  if (w_norm <= 0.0 || g_norm <= 0.0) return 1.0f;
  return static_cast<float>(eta * w_norm / (g_norm + weight_decay * w_norm));
}

double LambUpdateSumSquares(const float* __restrict w, const float* __restrict grad, const float* __restrict m,
                            const float* __restrict v, int64_t n, const LambArgs& a) {
  const LambConstants c = MakeLambConstants(a);
  double lanes[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      float mi = m[i + k], vi = v[i + k];
      const double u = LambElement(c, w[i + k], grad[i + k], mi, vi);
      lanes[k] += u * u;
    }
  }
  for (int k = 0; i < n; ++i, ++k) {
    float mi = m[i], vi = v[i];
    const double u = LambElement(c, w[i], grad[i], mi, vi);
    lanes[k] += u * u;
  }
  double sum = 0.0;
  for (int k = 0; k < kLanes; ++k) sum += lanes[k];
  return sum;
}

void LambUpdate(float* __restrict w, const float* __restrict grad, float* __restrict m, float* __restrict v, int64_t n,
                const LambArgs& a) {
  const LambConstants c = MakeLambConstants(a);
  const float step = a.lr * a.trust_ratio;
  for (int64_t i = 0; i < n; ++i) {
    float mi = m[i], vi = v[i];
    const float u = LambElement(c, w[i], grad[i], mi, vi);
    m[i] = mi;
    v[i] = vi;
    w[i] -= step * u;
  }
}

float LambTrustRatio(double w_norm, double u_norm) {
  if (w_norm <= 0.0 || u_norm <= 0.0) return 1.0f;
  return static_cast<float>(w_norm / u_norm);
}

}  // namespace ringmaster::engine::optim
