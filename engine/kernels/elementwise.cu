// Elementwise kernels (grid-stride loops), then their launchers.
#include "engine/kernels/elementwise.h"
#include "engine/kernels/kernel_util.cuh"

namespace ringmaster::kernels {
namespace {

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

#define RM_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)

__global__ void FillKernel(float* x, int64_t n, float value) {
  RM_GRID_STRIDE(i, n) x[i] = value;
}

__global__ void ScaleKernel(float* x, int64_t n, float alpha) {
  RM_GRID_STRIDE(i, n) x[i] *= alpha;
}

__global__ void AxpyKernel(float alpha, const float* x, float* y, int64_t n) {
  RM_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

__global__ void AddKernel(const float* a, const float* b, float* out, int64_t n, FloatType round) {
  RM_GRID_STRIDE(i, n) out[i] = RoundTo(round, a[i] + b[i]);
}

__global__ void MulKernel(const float* a, const float* b, float* out, int64_t n, FloatType round) {
  RM_GRID_STRIDE(i, n) out[i] = RoundTo(round, a[i] * b[i]);
}

__device__ __forceinline__ float LoadAs(const void* p, FloatType t, int64_t i) {
  switch (t) {
    case FloatType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case FloatType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void StoreAs(void* p, FloatType t, int64_t i, float v) {
  switch (t) {
    case FloatType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case FloatType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

__global__ void ConvertKernel(const void* src, FloatType src_type, void* dst, FloatType dst_type, int64_t n) {
  RM_GRID_STRIDE(i, n) StoreAs(dst, dst_type, i, LoadAs(src, src_type, i));
}

__global__ void RoundKernel(const float* src, float* dst, int64_t n, FloatType round) {
  RM_GRID_STRIDE(i, n) dst[i] = RoundTo(round, src[i]);
}

__global__ void AccumulateRoundedKernel(const float* src, float* dst, int64_t n, FloatType round) {
  RM_GRID_STRIDE(i, n) dst[i] += RoundTo(round, src[i]);
}

__global__ void NonFiniteKernel(const float* x, int64_t n, float* flag) {
  bool bad = false;
  RM_GRID_STRIDE(i, n) bad = bad || !isfinite(x[i]);
  if (bad) *flag = 1.0f;  // every writer stores the same value: the race is benign
}

__global__ void ReluKernel(const float* x, float* y, int64_t n, FloatType round) {
  RM_GRID_STRIDE(i, n) y[i] = RoundTo(round, x[i] > 0.0f ? x[i] : 0.0f);
}

__global__ void ReluBackwardKernel(const float* y, const float* dy, float* dx, int64_t n) {
  RM_GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void GeluKernel(const float* x, float* y, int64_t n, FloatType round) {
  RM_GRID_STRIDE(i, n) {
    const float v = x[i];
    const float u = kGeluScale * (v + kGeluCubic * v * v * v);
    y[i] = RoundTo(round, 0.5f * v * (1.0f + tanhf(u)));
  }
}

__global__ void GeluBackwardKernel(const float* x, const float* dy, float* dx, int64_t n, FloatType round) {
  RM_GRID_STRIDE(i, n) {
    const float v = x[i];
    const float u = kGeluScale * (v + kGeluCubic * v * v * v);
    const float t = tanhf(u);
    const float sech2 = 1.0f - t * t;
    const float local = 0.5f * (1.0f + t) + 0.5f * v * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = RoundTo(round, local * dy[i]);
  }
}

// engine/core/random.h's SplitMix64 and HashUniform, on the device; the
// backend test checks the masks bit for bit against the CPU's.
__device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float HashUniform(uint64_t key, uint64_t index) {
  const uint64_t h = SplitMix64(key ^ SplitMix64(index));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

__global__ void DropoutKernel(const float* x, float p, float keep_scale, uint64_t key, float* mask, float* y,
                              int64_t n, FloatType round) {
  RM_GRID_STRIDE(i, n) {
    const float m = HashUniform(key, static_cast<uint64_t>(i)) >= p ? keep_scale : 0.0f;
    mask[i] = m;
    y[i] = RoundTo(round, x[i] * m);
  }
}

#undef RM_GRID_STRIDE

}  // namespace

#define RM_LAUNCH(kernel, n, stream, ...)                                 \
  do {                                                                    \
    if ((n) <= 0) return cudaSuccess;                                     \
    kernel<<<GridFor(n), kThreads, 0, stream>>>(__VA_ARGS__);             \
    return cudaGetLastError();                                            \
  } while (0)

cudaError_t LaunchFill(float* x, int64_t n, float value, cudaStream_t stream) {
  RM_LAUNCH(FillKernel, n, stream, x, n, value);
}
cudaError_t LaunchScale(float* x, int64_t n, float alpha, cudaStream_t stream) {
  RM_LAUNCH(ScaleKernel, n, stream, x, n, alpha);
}
cudaError_t LaunchAxpy(float alpha, const float* x, float* y, int64_t n, cudaStream_t stream) {
  RM_LAUNCH(AxpyKernel, n, stream, alpha, x, y, n);
}
cudaError_t LaunchAdd(const float* a, const float* b, float* out, int64_t n, FloatType round, cudaStream_t stream) {
  RM_LAUNCH(AddKernel, n, stream, a, b, out, n, round);
}
cudaError_t LaunchMul(const float* a, const float* b, float* out, int64_t n, FloatType round, cudaStream_t stream) {
  RM_LAUNCH(MulKernel, n, stream, a, b, out, n, round);
}
cudaError_t LaunchConvert(const void* src, FloatType src_type, void* dst, FloatType dst_type, int64_t n,
                          cudaStream_t stream) {
  RM_LAUNCH(ConvertKernel, n, stream, src, src_type, dst, dst_type, n);
}
cudaError_t LaunchRound(const float* src, float* dst, int64_t n, FloatType round, cudaStream_t stream) {
  RM_LAUNCH(RoundKernel, n, stream, src, dst, n, round);
}
cudaError_t LaunchAccumulateRounded(const float* src, float* dst, int64_t n, FloatType round, cudaStream_t stream) {
  RM_LAUNCH(AccumulateRoundedKernel, n, stream, src, dst, n, round);
}
cudaError_t LaunchNonFiniteCheck(const float* x, int64_t n, float* flag, cudaStream_t stream) {
  RM_LAUNCH(NonFiniteKernel, n, stream, x, n, flag);
}
cudaError_t LaunchRelu(const float* x, float* y, int64_t n, FloatType round, cudaStream_t stream) {
  RM_LAUNCH(ReluKernel, n, stream, x, y, n, round);
}
cudaError_t LaunchReluBackward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  RM_LAUNCH(ReluBackwardKernel, n, stream, y, dy, dx, n);
}
cudaError_t LaunchGelu(const float* x, float* y, int64_t n, FloatType round, cudaStream_t stream) {
  RM_LAUNCH(GeluKernel, n, stream, x, y, n, round);
}
cudaError_t LaunchGeluBackward(const float* x, const float* dy, float* dx, int64_t n, FloatType round,
                               cudaStream_t stream) {
  RM_LAUNCH(GeluBackwardKernel, n, stream, x, dy, dx, n, round);
}
cudaError_t LaunchDropout(const float* x, float p, uint64_t key, float* mask, float* y, int64_t n, FloatType round,
                          cudaStream_t stream) {
  RM_LAUNCH(DropoutKernel, n, stream, x, p, 1.0f / (1.0f - p), key, mask, y, n, round);
}

#undef RM_LAUNCH

}  // namespace ringmaster::kernels
