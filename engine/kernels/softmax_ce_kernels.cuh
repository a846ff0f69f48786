// Softmax cross-entropy kernels (softmax_ce.h).
//   CountTargetsKernel: one block of kCeReduceThreads; count[0] = block sum of
//     per-thread counts (integers: exact below 2^24).
//   SoftmaxCrossEntropyRowKernel: one block of kCeThreads per row. A thread
//     owns the columns threadIdx.x * K + kCeThreads * K * i (K = 1, or a
//     16-byte pack of T when ld is whole packs and the pointers are aligned).
//     Pass 1 keeps a running (max, sum of exp(z - max)) over its columns
//     below v; the block combines them (the barriers inside BlockMax/BlockSum
//     also order every read of the row before the first write, so dlogits
//     may alias logits); pass 2 writes the row's gradient, zeros from v to ld.
//   CeLossKernel: one block of kCeReduceThreads; loss[0] += the block sum of
//     the row losses / count[0], by thread 0.
//
// Included by softmax_ce.cu and by the host emulation tests; includes only
// device_util.cuh (the includer provides the CUDA built-ins and __trap).
#ifndef RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::softmax_ce {

constexpr int kCeThreads = 256;
constexpr int kCeReduceThreads = 1024;

__global__ void __launch_bounds__(kCeReduceThreads)
    CountTargetsKernel(const int32_t* targets, int64_t m, int32_t ignore_index, float* count) {
  __shared__ float scratch[32];
  float c = 0.0f;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) c += targets[i] != ignore_index ? 1.0f : 0.0f;
  c = BlockSum(c, scratch);
  if (threadIdx.x == 0) *count = c;
}

template <int K, typename T>
__global__ void __launch_bounds__(kCeThreads)
    SoftmaxCrossEntropyRowKernel(const T* logits, int64_t v, int64_t ld, const int32_t* targets,
                                 int32_t ignore_index, const float* count, float grad_scale, float* row_loss,
                                 T* dlogits) {
  __shared__ float max_scratch[32];
  __shared__ float sum_scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t first = threadIdx.x * int64_t{K}, step = int64_t{blockDim.x} * K;
  const T* z = logits + r * ld;
  T* d = dlogits != nullptr ? dlogits + r * ld : nullptr;
  const int32_t y = targets[r];
  if (y == ignore_index) {
    if (d != nullptr) {
      float zero[K];
      for (int e = 0; e < K; ++e) zero[e] = 0.0f;
      for (int64_t j = first; j < ld; j += step) StoreFloats<K>(d + j, zero);
    }
    if (threadIdx.x == 0) row_loss[r] = 0.0f;
    return;
  }
  if (y < 0 || y >= v) __trap();
  const float zy = threadIdx.x == 0 ? ToFloat(z[y]) : 0.0f;
  float mx = -INFINITY, s = 0.0f;
  for (int64_t j = first; j < v; j += step) {
    float zv[K];
    LoadFloats<K>(z + j, zv);
    float pm = mx;
    for (int e = 0; e < K; ++e)
      if (j + e < v) pm = fmaxf(pm, zv[e]);
    if (pm > mx) {
      s = mx == -INFINITY ? 0.0f : s * expf(mx - pm);
      mx = pm;
    }
    for (int e = 0; e < K; ++e)
      if (j + e < v) s += expf(zv[e] - mx);
  }
  const float row_max = BlockMax(mx, max_scratch);
  const float row_sum = BlockSum(mx == -INFINITY ? 0.0f : s * expf(mx - row_max), sum_scratch);
  if (threadIdx.x == 0) row_loss[r] = logf(row_sum) - (zy - row_max);
  if (d == nullptr) return;
  const float inv_sum = 1.0f / row_sum;
  const float n = *count;
  const float g = n > 0.0f ? grad_scale / n : 0.0f;  // as the CPU forms it
  for (int64_t j = first; j < ld; j += step) {
    float zv[K];
    if (j < v) LoadFloats<K>(z + j, zv);
    for (int e = 0; e < K; ++e) {
      const int64_t col = j + e;
      zv[e] = col < v ? g * (expf(zv[e] - row_max) * inv_sum - (col == y ? 1.0f : 0.0f)) : 0.0f;
    }
    StoreFloats<K>(d + j, zv);
  }
}

__global__ void __launch_bounds__(kCeReduceThreads)
    CeLossKernel(const float* row_loss, int64_t m, const float* count, float* loss) {
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) s += row_loss[i];
  s = BlockSum(s, scratch);
  if (threadIdx.x == 0 && *count > 0.0f) *loss += s / *count;
}

}  // namespace ringmaster::kernels::softmax_ce

#endif  // RINGMASTER_ENGINE_KERNELS_SOFTMAX_CE_KERNELS_CUH_
