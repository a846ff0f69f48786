#ifndef RINGMASTER_ENGINE_KERNELS_LAYERNORM_H_
#define RINGMASTER_ENGINE_KERNELS_LAYERNORM_H_

// Fused LayerNorm over the last dimension: one warp per row, fp32 statistics.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// y[r, :] = round((x - mean) * rstd * gamma + beta); mean[r], rstd[r] saved
// (rstd = 1 / sqrt(var + eps), var biased). x, y [rows, c].
cudaError_t LaunchLayerNormForward(const float* x, const float* gamma, const float* beta, float eps, int64_t rows,
                                   int64_t c, float* y, float* mean, float* rstd, FloatType round,
                                   cudaStream_t stream);
// The residual add fused in: sum = round(a + b), then LayerNormForward of sum,
// in one pass (a and b read once; sum and y written once). sum may alias a or b.
cudaError_t LaunchAddLayerNormForward(const float* a, const float* b, const float* gamma, const float* beta,
                                      float eps, int64_t rows, int64_t c, float* sum, float* y, float* mean,
                                      float* rstd, FloatType round, cudaStream_t stream);
// g[r, :] = round(rstd * (dy * gamma - mean(dy * gamma) - xhat * mean(dy * gamma * xhat)));
// dx = g, or with a residual (may alias dx) dx = round(residual + g).
// dy_xhat[r, :] = dy * xhat (fp32, for dgamma: the caller column-sums it).
cudaError_t LaunchLayerNormBackward(const float* x, const float* dy, const float* gamma, const float* mean,
                                    const float* rstd, const float* residual, int64_t rows, int64_t c, float* dx,
                                    float* dy_xhat, FloatType round, cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_LAYERNORM_H_
