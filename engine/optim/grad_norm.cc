#include "engine/optim/grad_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/optim/cpu_update.h"

namespace ringmaster::engine::optim {
namespace {

constexpr double kClipEpsilon = 1e-6;  // as torch.nn.utils.clip_grad_norm_

absl::Status CheckGrads(const ParameterList& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter* p = params[i];
    if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat("parameter ", i, " is null"));
    const Tensor& g = p->grad;
    if (!g.defined()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter \"", p->name, "\" has no grad tensor"));
    }
    if (g.device() != Device::kCpu || g.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("parameter \"", p->name, "\" grad must be a host f32 tensor, got ",
                                                     DeviceName(g.device()), " ", DTypeName(g.dtype())));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> HasNonFiniteGrad(const ParameterList& params) {
  RETURN_IF_ERROR(CheckGrads(params));
  for (const Parameter* p : params) {
    if (!AllFinite(p->grad.f32(), p->grad.numel())) return true;
  }
  return false;
}

absl::StatusOr<double> GradSumSquares(const ParameterList& params) {
  RETURN_IF_ERROR(CheckGrads(params));
  double sum = 0.0;
  for (const Parameter* p : params) sum += SumSquares(p->grad.f32(), p->grad.numel());
  return sum;
}

absl::StatusOr<double> GlobalGradNorm(const ParameterList& params, float grad_scale) {
  ASSIGN_OR_RETURN(double sum, GradSumSquares(params));
  return static_cast<double>(grad_scale) * std::sqrt(sum);
}

float ClipCoefficient(double grad_norm, float max_norm) {
  if (max_norm <= 0.0f || !std::isfinite(grad_norm)) return 1.0f;
  const double coeff = static_cast<double>(max_norm) / (grad_norm + kClipEpsilon);
  return coeff < 1.0 ? static_cast<float>(coeff) : 1.0f;
}

absl::StatusOr<double> ClipGradNorm(const ParameterList& params, float max_norm, float grad_scale) {
  ASSIGN_OR_RETURN(double norm, GlobalGradNorm(params, grad_scale));
  const float coeff = ClipCoefficient(norm, max_norm);
  if (coeff < 1.0f) {
    for (const Parameter* p : params) ScaleInPlace(p->grad.f32(), p->grad.numel(), coeff);
  }
  return norm;
}

}  // namespace ringmaster::engine::optim
