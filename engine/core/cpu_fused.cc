// CpuBackend: the fused ops of backend.h as their unfused sequences, so a
// model using them computes bitwise what it computed with the separate ops
// (the CPU is the reference; fusion pays on a device, not here).

#include "engine/core/check.h"
#include "engine/core/cpu_backend.h"

namespace ringmaster::engine {

void CpuBackend::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                                   const Tensor& y) {
  Gemm(false, true, 1.0f, x, w, 0.0f, pre, &bias);
  GeluForward(pre, y);
}

void CpuBackend::AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                     float eps, const Tensor& sum, const Tensor& y, const Tensor& mean,
                                     const Tensor& rstd) {
  Add(a, b, sum);
  LayerNormForward(sum, gamma, beta, eps, y, mean, rstd);
}

void CpuBackend::AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                      const Tensor& rstd, const Tensor& residual, const Tensor& dx,
                                      const Tensor& dgamma, const Tensor& dbeta) {
  ENGINE_CHECK(dx.raw() != x.raw() && dx.raw() != dy.raw(), "AddLayerNormBackward: dx aliases x or dy");
  Tensor ln_dx = Empty(x.shape());
  LayerNormBackward(x, dy, gamma, mean, rstd, ln_dx, dgamma, dbeta);
  Add(residual, ln_dx, dx);
}

}  // namespace ringmaster::engine
