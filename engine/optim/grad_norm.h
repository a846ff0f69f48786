#ifndef RINGMASTER_ENGINE_OPTIM_GRAD_NORM_H_
#define RINGMASTER_ENGINE_OPTIM_GRAD_NORM_H_

// Gradient checks over a ParameterList's host f32 grads: inf/NaN detection for
// the dynamic loss scaler, the global L2 norm, and clipping by global norm.
// Every function returns INVALID_ARGUMENT naming the parameter whose grad is
// undefined or not a host f32 tensor (device grads go through the backend).
// Stateless; safe to call from any thread that owns the grads.
//
// Units: grads are stored multiplied by the loss scale; `grad_scale` is the
// factor back to true gradients (the inverse loss scale), so the norms below
// are of true gradients.
//
// Clipping without an extra pass: fold the coefficient into the optimizer's
// grad_scale, Step(lr, grad_scale * ClipCoefficient(norm, max_norm)).
// Across a pipeline (each rank holding other parameters), allreduce
// GradSumSquares over the stages, then norm = grad_scale * sqrt(sum).

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/core/parameter.h"

namespace ringmaster::engine::optim {

// True when any grad element is inf or NaN (the loss scaler's overflow test).
absl::StatusOr<bool> HasNonFiniteGrad(const ParameterList& params);

// sum over parameters and elements of grad^2, as stored (fp64, fixed order).
absl::StatusOr<double> GradSumSquares(const ParameterList& params);

// grad_scale * sqrt(GradSumSquares(params)): the global L2 norm of the true
// gradients; inf or NaN when a grad is.
absl::StatusOr<double> GlobalGradNorm(const ParameterList& params, float grad_scale);

// PyTorch clip_grad_norm_'s factor: min(1, max_norm / (grad_norm + 1e-6)).
// 1 when max_norm <= 0 (clipping off) or grad_norm is not finite (that step is
// skipped by the loss scaler; clipping cannot repair it).
float ClipCoefficient(double grad_norm, float max_norm);

// Multiplies every grad by ClipCoefficient(GlobalGradNorm(params, grad_scale),
// max_norm) in place (the grads keep their loss scale) and returns the norm
// before clipping. Prefer folding the coefficient into Step's grad_scale.
absl::StatusOr<double> ClipGradNorm(const ParameterList& params, float max_norm, float grad_scale);

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_GRAD_NORM_H_
