#ifndef RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_H_
#define RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_H_

// Elementwise kernels of the CUDA backend: fp32 utilities, conversions,
// rounding, the inf/NaN check, activations and dropout. Arrays hold n
// elements. `float*` arrays are f32 (parameters, gradients, masks);
// activation arrays are `void*` in the storage type `t` (kF32, kF16 or
// kBF16), the same for every activation pointer of one call. Values are
// computed in fp32 and rounded once, to nearest even, when stored. Every
// launcher enqueues on `stream` and returns the launch's cudaError_t
// (cudaErrorInvalidValue for a storage type other than those three). Outputs
// may alias inputs of the same type and size.

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// ---- fp32 utilities (parameters and gradients; never rounded) --------------
cudaError_t LaunchFill(float* x, int64_t n, float value, cudaStream_t stream);
cudaError_t LaunchScale(float* x, int64_t n, float alpha, cudaStream_t stream);
// y += alpha * x.
cudaError_t LaunchAxpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream);

// out = a + b (the residual add).
cudaError_t LaunchAdd(const void* a, const void* b, void* out, int64_t n, FloatType t, cudaStream_t stream);
// dx = dy * mask (dropout backward; mask f32).
cudaError_t LaunchMul(const void* dy, const float* mask, void* dx, int64_t n, FloatType t, cudaStream_t stream);
// dst (dst_type) = src (src_type), round to nearest even; f32, f16 or bf16 storage.
cudaError_t LaunchConvert(const void* src, FloatType src_type, void* dst, FloatType dst_type, int64_t n,
                          cudaStream_t stream);
// dst = RoundTo(round, src): f32 values rounded to `round` and kept as f32.
cudaError_t LaunchRound(const float* src, float* dst, int64_t n, FloatType round, cudaStream_t stream);
// dst (f32) += src (src_type): a 16-bit partial added into an fp32 gradient.
cudaError_t LaunchAccumulate(const void* src, FloatType src_type, float* dst, int64_t n, cudaStream_t stream);
// flag[0] = 1 when some x[i] is inf or NaN; flag untouched otherwise.
cudaError_t LaunchNonFiniteCheck(const float* x, int64_t n, float* flag, cudaStream_t stream);

// ---- Activations (x, y, dy, dx in t) --------------------------------------------
// y = max(x, 0).
cudaError_t LaunchRelu(const void* x, void* y, int64_t n, FloatType t, cudaStream_t stream);
// dx = dy * (y > 0); y is the forward output.
cudaError_t LaunchReluBackward(const void* y, const void* dy, void* dx, int64_t n, FloatType t,
                               cudaStream_t stream);
// GPT-2's tanh GELU, and dx = gelu'(x) * dy.
cudaError_t LaunchGelu(const void* x, void* y, int64_t n, FloatType t, cudaStream_t stream);
cudaError_t LaunchGeluBackward(const void* x, const void* dy, void* dx, int64_t n, FloatType t, cudaStream_t stream);
// mask[i] (f32) = (HashUniform(key, i) >= p) / (1 - p) (engine/core/random.h,
// bit for bit); y = x * mask. 0 <= p < 1.
cudaError_t LaunchDropout(const void* x, float p, uint64_t key, float* mask, void* y, int64_t n, FloatType t,
                          cudaStream_t stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_ELEMENTWISE_H_
