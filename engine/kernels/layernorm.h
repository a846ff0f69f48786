#ifndef RINGMASTER_ENGINE_KERNELS_LAYERNORM_H_
#define RINGMASTER_ENGINE_KERNELS_LAYERNORM_H_

// Fused LayerNorm over the last dimension: one warp per row, fp32 statistics.
// Activations (x, y, a, b, sum, dy, dx, residual) are [rows, c] in the
// storage type t (kF32, kF16 or kBF16); gamma, beta [c], mean, rstd [rows]
// and dy_xhat [rows, c] are f32. Math is fp32; a stored activation is rounded
// once, to nearest even. Every launcher enqueues on `stream` and returns the
// launch's cudaError_t (cudaErrorInvalidValue for another t).

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// y[r, :] = (x - mean) * rstd * gamma + beta; mean[r], rstd[r] saved
// (rstd = 1 / sqrt(var + eps), var biased).
cudaError_t LaunchLayerNormForward(const void* x, const float* gamma, const float* beta, float eps, int64_t rows,
                                   int64_t c, void* y, float* mean, float* rstd, FloatType t, cudaStream_t stream);
// The residual add fused in: sum = a + b (stored in t), then LayerNormForward
// of the stored sum, as the CPU's Add then LayerNorm, in one pass (a and b
// read once; sum and y written once). sum may alias a or b.
cudaError_t LaunchAddLayerNormForward(const void* a, const void* b, const float* gamma, const float* beta,
                                      float eps, int64_t rows, int64_t c, void* sum, void* y, float* mean,
                                      float* rstd, FloatType t, cudaStream_t stream);
// g[r, :] = rstd * (dy * gamma - mean(dy * gamma) - xhat * mean(dy * gamma * xhat)),
// xhat = (x - mean) * rstd. dx = g, or with a residual (may alias dx)
// dx = residual + g, where g is first stored in t: the CPU's LayerNormBackward
// then Add, bit for bit the same roundings.
// dy_xhat[r, :] = dy * xhat (f32, for dgamma: the caller column-sums it;
// dbeta is the column sum of dy).
cudaError_t LaunchLayerNormBackward(const void* x, const void* dy, const float* gamma, const float* mean,
                                    const float* rstd, const void* residual, int64_t rows, int64_t c, void* dx,
                                    float* dy_xhat, FloatType t, cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_LAYERNORM_H_
