#ifndef RINGMASTER_ENGINE_OPTIM_CPU_UPDATE_H_
#define RINGMASTER_ENGINE_OPTIM_CPU_UPDATE_H_

// Optimizer update kernels over fp32 host arrays: the CPU twins of the fused
// CUDA optimizer kernels. Each kernel updates n elements in place, reads every
// array once, and takes `grad_scale`, the factor that turns the stored gradient
// into the true one (the inverse loss scale, times a clipping coefficient if
// any): g = grad_scale * grad[i]. No separate unscale pass is needed.
//
// Contracts common to all kernels:
//   - arrays do not overlap (they are declared __restrict);
//   - scalar arithmetic per element is fixed, so results are deterministic
//     (bitwise, for a given binary) and independent of threading;
//   - norms (SumSquares) accumulate in fp64 in a fixed order.
// Whole-layer quantities (LARS/LAMB trust ratios, Adam bias corrections) are
// computed by the caller and passed in, so a kernel can run on any slice of a
// parameter (a ZeRO-1 shard) without knowing the rest of it.

#include <cstdint>

namespace ringmaster::engine::optim {

// sum_i x[i]^2 in fp64 (8 fixed lanes, then lanes summed in order).
double SumSquares(const float* x, int64_t n);

// True when every x[i] is finite (no inf, no NaN).
bool AllFinite(const float* x, int64_t n);

// x[i] *= factor.
void ScaleInPlace(float* x, int64_t n, float factor);

// SGD with PyTorch torch.optim.SGD semantics (dampening 0), weight decay as an
// L2 term added to the gradient (NOT decoupled):
//   g   = grad_scale * grad + weight_decay * w
//   buf = momentum * buf + g              (buf starts at 0, so step 1 gives buf = g)
//   d   = nesterov ? g + momentum * buf : buf
//   w  -= lr * d
// With momentum == 0, `buf` is not touched and may be null: w -= lr * g.
struct SgdArgs {
  float lr = 0.0f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  float grad_scale = 1.0f;
};
void SgdUpdate(float* w, const float* grad, float* buf, int64_t n, const SgdArgs& args);

// AdamW with PyTorch torch.optim.AdamW semantics (decoupled weight decay):
//   w  *= 1 - lr * weight_decay             (the factor formed in fp64, rounded once)
//   m   = beta1 * m + (1 - beta1) * g
//   v   = beta2 * v + (1 - beta2) * g^2
//   w  -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
// where g = grad_scale * grad, bc1 = 1 - beta1^step, bc2 = 1 - beta2^step and
// step >= 1 counts this update (the first update has step 1).
//
// The betas are fp64 so that 1 - beta is formed as PyTorch forms it (in fp64,
// then rounded once): 1.0f - 0.999f is 1.3e-5 relative away from 0.001.
struct AdamWArgs {
  float lr = 0.0f;
  double beta1 = 0.9;
  double beta2 = 0.999;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;
  float grad_scale = 1.0f;
};
void AdamWUpdate(float* w, const float* grad, float* m, float* v, int64_t n, const AdamWArgs& args);

// LARS (You, Gitman, Ginsburg 2017), in the form of NVIDIA apex LARC over
// PyTorch SGD: the trust ratio scales the gradient, the learning rate stays
// outside the momentum buffer:
//   d   = trust_ratio * (g + weight_decay * w)      g = grad_scale * grad
//   buf = momentum * buf + d
//   w  -= lr * buf
// trust_ratio comes from LarsTrustRatio over the whole parameter. A parameter
// excluded from decay (Parameter::decay == false) runs with trust_ratio = 1 and
// weight_decay = 0, which is plain SGD with momentum.
struct LarsArgs {
  float lr = 0.0f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float trust_ratio = 1.0f;
  float grad_scale = 1.0f;
};
void LarsUpdate(float* w, const float* grad, float* buf, int64_t n, const LarsArgs& args);

// eta * ||w|| / (||g|| + weight_decay * ||w||), or 1 when ||w|| or ||g|| is 0
// (a fresh zero-initialised layer, or a layer with no gradient this step).
// Norms are of the whole parameter and of the true (unscaled) gradient.
float LarsTrustRatio(double w_norm, double g_norm, float eta, float weight_decay);

// LAMB (You et al. 2019, as NVIDIA apex FusedLAMB with bias correction):
//   m  = beta1 * m + (1 - beta1) * g                g = grad_scale * grad
//   v  = beta2 * v + (1 - beta2) * g^2
//   u  = (m / bc1) / (sqrt(v / bc2) + eps) + weight_decay * w
//   w -= lr * trust_ratio * u,   trust_ratio = ||w|| / ||u|| over the whole parameter
// bc1 = 1 - beta1^step, bc2 = 1 - beta2^step, step >= 1.
// It runs in two passes so that the trust ratio can be reduced across shards
// before anything is written:
//   1. LambUpdateSumSquares: sum of u^2 over the slice (reads only);
//   2. LambUpdate: recomputes m, v, u identically and writes m, v, w.
// Parameters excluded from decay use weight_decay = 0 and trust_ratio = 1 (apex's
// default, use_nvlamb = false).
struct LambArgs {
  float lr = 0.0f;
  double beta1 = 0.9;
  double beta2 = 0.999;
  float eps = 1e-6f;
  float weight_decay = 0.0f;
  int64_t step = 1;
  float trust_ratio = 1.0f;
  float grad_scale = 1.0f;
};
double LambUpdateSumSquares(const float* w, const float* grad, const float* m, const float* v, int64_t n,
                            const LambArgs& args);
void LambUpdate(float* w, const float* grad, float* m, float* v, int64_t n, const LambArgs& args);

// ||w|| / ||u||, or 1 when either norm is 0.
float LambTrustRatio(double w_norm, double u_norm);

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_CPU_UPDATE_H_
