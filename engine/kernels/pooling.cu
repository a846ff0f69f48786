// Max pooling kernels, then their launchers.
#include "engine/kernels/kernel_util.cuh"
#include "engine/kernels/pooling.h"

namespace ringmaster::kernels {
namespace {

// Index (in the plane) of the first maximum of window (i, j), scanning rows then columns.
__device__ __forceinline__ int64_t FirstMax(const float* xp, int64_t w, int64_t k, int64_t s, int64_t i, int64_t j) {
  int64_t best = (i * s) * w + j * s;
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) {
      const int64_t idx = (i * s + a) * w + j * s + b;
      if (xp[idx] > xp[best]) best = idx;
    }
  return best;
}

__global__ void MaxPoolForwardKernel(const float* x, int64_t planes, int64_t h, int64_t w, int64_t k, int64_t s,
                                     int64_t oh, int64_t ow, float* y) {
  const int64_t total = planes * oh * ow;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{blockDim.x} * gridDim.x) {
    const int64_t p = idx / (oh * ow), i = (idx / ow) % oh, j = idx % ow;
    const float* xp = x + p * h * w;
    y[idx] = xp[FirstMax(xp, w, k, s, i, j)];
  }
}

// One thread per input element: gathers from the windows that contain it.
__global__ void MaxPoolBackwardKernel(const float* x, const float* dy, int64_t planes, int64_t h, int64_t w,
                                      int64_t k, int64_t s, int64_t oh, int64_t ow, float* dx, FloatType round) {
  const int64_t total = planes * h * w;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{blockDim.x} * gridDim.x) {
    const int64_t p = idx / (h * w), r = (idx / w) % h, c = idx % w, here = r * w + c;
    const float* xp = x + p * h * w;
    const float* dyp = dy + p * oh * ow;
    // Windows i with i*s <= r < i*s + k, likewise j.
    const int64_t i0 = r >= k ? (r - k) / s + 1 : 0, i1 = min(oh - 1, r / s);
    const int64_t j0 = c >= k ? (c - k) / s + 1 : 0, j1 = min(ow - 1, c / s);
    float acc = 0.0f;
    for (int64_t i = i0; i <= i1; ++i)
      for (int64_t j = j0; j <= j1; ++j)
        if (FirstMax(xp, w, k, s, i, j) == here) acc += dyp[i * ow + j];
    dx[idx] = s < k ? RoundTo(round, acc) : acc;
  }
}

}  // namespace

cudaError_t LaunchMaxPoolForward(const float* x, int64_t planes, int64_t h, int64_t w, int64_t k, int64_t s,
                                 float* y, cudaStream_t stream) {
  const int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
  if (planes * oh * ow <= 0) return cudaSuccess;
  MaxPoolForwardKernel<<<GridFor(planes * oh * ow), kThreads, 0, stream>>>(x, planes, h, w, k, s, oh, ow, y);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPoolBackward(const float* x, const float* dy, int64_t planes, int64_t h, int64_t w, int64_t k,
                                  int64_t s, float* dx, FloatType round, cudaStream_t stream) {
  const int64_t oh = (h - k) / s + 1, ow = (w - k) / s + 1;
  if (planes * h * w <= 0) return cudaSuccess;
  MaxPoolBackwardKernel<<<GridFor(planes * h * w), kThreads, 0, stream>>>(x, dy, planes, h, w, k, s, oh, ow, dx,
                                                                          round);
  return cudaGetLastError();
}

}  // namespace ringmaster::kernels
