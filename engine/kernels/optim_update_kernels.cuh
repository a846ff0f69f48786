// Fused multi-tensor optimizer kernels (optim_update.h), one block of
// kOptimThreads per chunk of the table; the per-element arithmetic is
// engine/optim/cpu_update.cc's. Also the host-side AdamConstants the Adam
// family's launches take (MakeAdamConstants).
//
// Included by optim_update.cu and by the host emulation tests; includes the
// optimizer's device helpers, plain C++ headers and <cmath> only (the
// includer provides the CUDA built-ins).
#ifndef RINGMASTER_ENGINE_KERNELS_OPTIM_UPDATE_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_OPTIM_UPDATE_KERNELS_CUH_

#include <cmath>

#include "engine/kernels/loss_scale.h"
#include "engine/kernels/optim_reduce.cuh"
#include "engine/kernels/optim_update.h"

namespace ringmaster::kernels::optim_update {

// Adam-family constants formed on the host exactly as cpu_update.cc forms them.
struct AdamConstants {
  float lr, beta1, one_minus_beta1, beta2, one_minus_beta2;
  float bc1, bc2;          // LAMB: 1 - beta^step rounded once
  float step_size;         // AdamW: lr / bc1
  float bc2_sqrt;          // AdamW: sqrt(bc2)
  float eps, grad_scale;
  double beta1_exact, beta2_exact;  // for bias corrections formed on the device
};

inline double BiasCorrection(double beta, int64_t step) { return 1.0 - std::pow(beta, static_cast<double>(step)); }

inline AdamConstants MakeAdamConstants(const AdamHyper& h) {
  const double bc1 = BiasCorrection(h.beta1, h.step), bc2 = BiasCorrection(h.beta2, h.step);
  return AdamConstants{h.lr,
                       static_cast<float>(h.beta1),
                       static_cast<float>(1.0 - h.beta1),
                       static_cast<float>(h.beta2),
                       static_cast<float>(1.0 - h.beta2),
                       static_cast<float>(bc1),
                       static_cast<float>(bc2),
                       static_cast<float>(h.lr / bc1),
                       static_cast<float>(std::sqrt(bc2)),
                       h.eps,
                       h.grad_scale,
                       h.beta1,
                       h.beta2};
}

// The learning rate of this step: the control block's when the host put it
// there (a replayed CUDA graph), else the launch argument.
__device__ inline float StepLr(const DeviceStepControl* control, float host_lr) {
  return control != nullptr && control->device_hyper ? control->lr : host_lr;
}

// The Adam constants of this step as MakeAdamConstants forms them, from the
// control block's lr and step when the host put them there.
__device__ inline void DeviceAdamConstants(const DeviceStepControl* control, AdamConstants* c) {
  if (control == nullptr || !control->device_hyper) return;
  const double step = static_cast<double>(control->optimizer_steps + 1);
  const double bc1 = 1.0 - pow(c->beta1_exact, step), bc2 = 1.0 - pow(c->beta2_exact, step);
  c->lr = control->lr;
  c->bc1 = static_cast<float>(bc1);
  c->bc2 = static_cast<float>(bc2);
  c->step_size = static_cast<float>(static_cast<double>(control->lr) / bc1);
  c->bc2_sqrt = static_cast<float>(sqrt(bc2));
}

// The gradient factor of this step, or false when the step is skipped.
__device__ inline bool StepScale(const DeviceStepControl* control, float host_scale, float* s) {
  if (control == nullptr) {
    *s = host_scale;
    return true;
  }
  if (control->skip) return false;
  *s = host_scale * control->grad_scale;
  return true;
}

__global__ void __launch_bounds__(kOptimThreads) SgdKernel(MultiTensorTable table, SgdHyper h, const DeviceStepControl* control) {
  float s;
  if (!StepScale(control, h.grad_scale, &s)) return;
  const ChunkRange r = BlockChunk(table);
  float* w = r.e->w;
  const float* grad = r.e->g;
  float* buf = r.e->s0;
  const float lr = StepLr(control, h.lr), mu = h.momentum, wd = r.e->weight_decay;
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    const float g = s * grad[i] + wd * w[i];
    if (mu == 0.0f) {
      w[i] -= lr * g;
      continue;
    }
    const float b = mu * buf[i] + g;
    buf[i] = b;
    w[i] -= lr * (h.nesterov ? g + mu * b : b);
  }
}

__global__ void __launch_bounds__(kOptimThreads)
    AdamWKernel(MultiTensorTable table, AdamConstants c, const DeviceStepControl* control) {
  float s;
  if (!StepScale(control, c.grad_scale, &s)) return;
  DeviceAdamConstants(control, &c);
  const ChunkRange r = BlockChunk(table);
  float* w = r.e->w;
  const float* grad = r.e->g;
  float* m = r.e->s0;
  float* v = r.e->s1;
  const float decay = static_cast<float>(1.0 - static_cast<double>(c.lr) * r.e->weight_decay);
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    const float g = s * grad[i];
    const float mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
    const float vi = c.beta2 * v[i] + c.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / c.bc2_sqrt + c.eps;
    w[i] = w[i] * decay - c.step_size * (mi / denom);
  }
}

// cpu_update.cc's LarsTrustRatio.
__device__ inline float LarsTrust(double w_norm, double g_norm, float eta, float wd) {
  if (w_norm <= 0.0 || g_norm <= 0.0) return 1.0f;
  return static_cast<float>(eta * w_norm / (g_norm + wd * w_norm));
}

__global__ void __launch_bounds__(kOptimThreads) LarsKernel(MultiTensorTable table, LarsHyper h, const DeviceStepControl* control,
                           const double* w_sums, const double* g_sums) {
  float s;
  if (!StepScale(control, h.grad_scale, &s)) return;
  const ChunkRange r = BlockChunk(table);
  const int entry = table.chunks[blockIdx.x].entry;
  const bool trusted = r.e->trust != 0;
  const float wd = trusted ? r.e->weight_decay : 0.0f;
  const double scale_sq = static_cast<double>(s) * s;
  const float trust =
      trusted ? LarsTrust(sqrt(w_sums[entry]), sqrt(g_sums[entry] * scale_sq), h.trust_coefficient, wd) : 1.0f;
  float* w = r.e->w;
  const float* grad = r.e->g;
  float* buf = r.e->s0;
  const float lr = StepLr(control, h.lr), mu = h.momentum;
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    // Untrusted entries: SgdUpdate without decay; trust 1 gives the same numbers.
    const float d = trusted ? trust * (s * grad[i] + wd * w[i]) : s * grad[i];
    if (mu == 0.0f) {
      w[i] -= lr * d;
      continue;
    }
    const float b = mu * buf[i] + d;
    buf[i] = b;
    w[i] -= lr * b;
  }
}

// cpu_update.cc's LambElement: the update direction u of one element; m and v
// become their new values.
__device__ inline float LambElement(const AdamConstants& c, float s, float wd, float w, float grad, float& m,
                                    float& v) {
  const float g = s * grad;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  return (m / c.bc1) / (sqrtf(v / c.bc2) + c.eps) + wd * w;
}

// Stage 1 of ||u||^2 per chunk (reads only).
__global__ void __launch_bounds__(kOptimThreads)
    LambSumSquaresKernel(MultiTensorTable table, AdamConstants c, const DeviceStepControl* control,
                                     double* partials) {
  float s;
  if (!StepScale(control, c.grad_scale, &s)) return;
  DeviceAdamConstants(control, &c);
  const ChunkRange r = BlockChunk(table);
  double sum = 0.0;
  if (r.e->trust) {
    for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
      float m = r.e->s0[i], v = r.e->s1[i];
      const double u = LambElement(c, s, r.e->weight_decay, r.e->w[i], r.e->g[i], m, v);
      sum += u * u;
    }
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void __launch_bounds__(kOptimThreads) LambKernel(MultiTensorTable table, AdamConstants c, const DeviceStepControl* control,
                           const double* w_sums, const double* u_sums) {
  float s;
  if (!StepScale(control, c.grad_scale, &s)) return;
  DeviceAdamConstants(control, &c);
  const ChunkRange r = BlockChunk(table);
  const int entry = table.chunks[blockIdx.x].entry;
  float trust = 1.0f;
  if (r.e->trust) {
    const double w_norm = sqrt(w_sums[entry]), u_norm = sqrt(u_sums[entry]);
    if (w_norm > 0.0 && u_norm > 0.0) trust = static_cast<float>(w_norm / u_norm);
  }
  const float step = c.lr * trust;
  float* w = r.e->w;
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
    float m = r.e->s0[i], v = r.e->s1[i];
    const float u = LambElement(c, s, r.e->weight_decay, w[i], r.e->g[i], m, v);
    r.e->s0[i] = m;
    r.e->s1[i] = v;
    w[i] -= step * u;
  }
}

}  // namespace ringmaster::kernels::optim_update

#endif  // RINGMASTER_ENGINE_KERNELS_OPTIM_UPDATE_KERNELS_CUH_
