// Max pooling kernels (pooling.h): grid-stride, kThreads threads per block,
// any grid. Forward: one thread per output element. Backward: one thread per
// input element, gathering from the windows that contain it (no atomics, a
// fixed order: deterministic).
//
// Included by pooling.cu and by the host emulation tests; includes only
// device_util.cuh (the includer provides the CUDA built-ins).
#ifndef RINGMASTER_ENGINE_KERNELS_POOLING_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_POOLING_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::pooling {

// Index (in the plane) of the first maximum of window (i, j), scanning rows then columns.
template <typename T>
__device__ __forceinline__ int64_t FirstMax(const T* xp, int64_t w, int64_t k, int64_t s, int64_t i, int64_t j) {
  int64_t best = (i * s) * w + j * s;
  float best_v = ToFloat(xp[best]);
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) {
      const int64_t idx = (i * s + a) * w + j * s + b;
      const float v = ToFloat(xp[idx]);
      if (v > best_v) {
        best = idx;
        best_v = v;
      }
    }
  return best;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) MaxPoolForwardKernel(const T* x, int64_t planes, int64_t h, int64_t w,
                                                                  int64_t k, int64_t s, int64_t oh, int64_t ow,
                                                                  T* y) {
  const int64_t total = planes * oh * ow;
  for (int64_t idx = GlobalThread(); idx < total; idx += GlobalStride()) {
    const int64_t p = idx / (oh * ow), i = (idx / ow) % oh, j = idx % ow;
    const T* xp = x + p * h * w;
    y[idx] = xp[FirstMax(xp, w, k, s, i, j)];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    MaxPoolBackwardKernel(const T* x, const T* dy, int64_t planes, int64_t h, int64_t w, int64_t k, int64_t s,
                          int64_t oh, int64_t ow, T* dx) {
  const int64_t total = planes * h * w;
  for (int64_t idx = GlobalThread(); idx < total; idx += GlobalStride()) {
    const int64_t p = idx / (h * w), r = (idx / w) % h, c = idx % w, here = r * w + c;
    const T* xp = x + p * h * w;
    const T* dyp = dy + p * oh * ow;
    // Windows i with i * s <= r < i * s + k, likewise j (none past the last window).
    const int64_t i0 = r >= k ? (r - k) / s + 1 : 0, i1 = r / s < oh - 1 ? r / s : oh - 1;
    const int64_t j0 = c >= k ? (c - k) / s + 1 : 0, j1 = c / s < ow - 1 ? c / s : ow - 1;
    float acc = 0.0f;
    for (int64_t i = i0; i <= i1; ++i)
      for (int64_t j = j0; j <= j1; ++j)
        if (FirstMax(xp, w, k, s, i, j) == here) acc += ToFloat(dyp[i * ow + j]);
    dx[idx] = FromFloat<T>(acc);
  }
}

}  // namespace ringmaster::kernels::pooling

#endif  // RINGMASTER_ENGINE_KERNELS_POOLING_KERNELS_CUH_
