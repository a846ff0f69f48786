#ifndef RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_H_
#define RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_H_

// Elementwise kernels of the CUDA backend: utilities, conversions, rounding,
// the inf/NaN check, activations and dropout. Pointers are device f32 arrays
// of n elements unless stated; every launcher enqueues on `stream` and returns
// the launch's cudaError_t. `round` rounds each written value to that format
// (kF32: no rounding), as the CPU backend does. Outputs may alias inputs.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

cudaError_t LaunchFill(float* x, int64_t n, float value, cudaStream_t stream);
cudaError_t LaunchScale(float* x, int64_t n, float alpha, cudaStream_t stream);
// y += alpha * x.
cudaError_t LaunchAxpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);
// out = round(a + b).
cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n, FloatType round, cudaStream_t stream);
// out = round(a * b) (dropout backward).
cudaError_t LaunchMul(const float* a, const float* b, float* out, int64_t n, FloatType round, cudaStream_t stream);
// dst (dst_type) = src (src_type), round to nearest even; f32, f16 or bf16 storage.
cudaError_t LaunchConvert(const void* src, FloatType src_type, void* dst, FloatType dst_type, int64_t n,
                          cudaStream_t stream);
// dst = round(src) (f32 values rounded to `round` and kept as f32).
cudaError_t LaunchRound(const float* src, float* dst, int64_t n, FloatType round, cudaStream_t stream);
// dst += round(src): an accumulating output's new contribution.
cudaError_t LaunchAccumulateRounded(const float* src, float* dst, int64_t n, FloatType round, cudaStream_t stream);
// flag[0] = 1 when some x[i] is inf or NaN; flag untouched otherwise.
cudaError_t LaunchNonFiniteCheck(const float* x, int64_t n, float* flag, cudaStream_t stream);

cudaError_t LaunchRelu(const float* x, float* y, int64_t n, FloatType round, cudaStream_t stream);
// dx = dy * (y > 0) (no rounding: masking a rounded value).
cudaError_t LaunchReluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);
// GPT-2's tanh GELU and its derivative times dy.
cudaError_t LaunchGelu(const float* x, float* y, int64_t n, FloatType round, cudaStream_t stream);
cudaError_t LaunchGeluBackward(const float* x, const float* dy, float* dx, int64_t n, FloatType round,
                               cudaStream_t stream);
// mask[i] = (HashUniform(key, i) >= p) / (1 - p) (engine/core/random.h, bit for
// bit); y = round(x * mask).
cudaError_t LaunchDropout(const float* x, float p, uint64_t key, float* mask, float* y, int64_t n, FloatType round,
                          cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_H_
