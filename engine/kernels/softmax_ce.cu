// Softmax cross-entropy: count, per-row fused kernel, loss reduction; then the launcher.
#include "engine/kernels/kernel_util.cuh"
#include "engine/kernels/softmax_ce.h"

namespace ringmaster::kernels {
namespace {

constexpr int kReduceThreads = 1024;

// scratch[0] = count of counted rows (as float; exact below 2^24 rows).
__global__ void CountKernel(const int32_t* targets, int64_t m, int64_t v, int32_t ignore_index, float* count) {
  __shared__ float scratch[32];
  float c = 0.0f;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
    const int32_t y = targets[i];
    if (y == ignore_index) continue;
    if (y < 0 || y >= v) __trap();
    c += 1.0f;
  }
  c = BlockSum(c, scratch);
  if (threadIdx.x == 0) *count = c;
}

// Running (max, sum of exp(z - max)) pairs, merged.
__device__ __forceinline__ void Merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float mx = fmaxf(m, m2);
  s = s * expf(m - mx) + s2 * expf(m2 - mx);
  m = mx;
}

__global__ void RowKernel(const float* logits, const int32_t* targets, int64_t v, int32_t ignore_index,
                          float grad_scale, const float* count, float* row_loss, float* dlogits, FloatType round) {
  __shared__ float max_scratch[32];
  __shared__ float sum_scratch[32];
  const int64_t r = blockIdx.x;
  const float* z = logits + r * v;
  float* d = dlogits + r * v;
  const int32_t y = targets[r];
  if (y == ignore_index) {
    for (int64_t j = threadIdx.x; j < v; j += blockDim.x) d[j] = 0.0f;
    if (threadIdx.x == 0) row_loss[r] = 0.0f;
    return;
  }
  float m = -INFINITY, s = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) Merge(m, s, z[j], 1.0f);
  // Combine the threads' pairs: the block max, then every sum rescaled to it.
  const float block_max = BlockMax(m, max_scratch);
  const float scaled = m == -INFINITY ? 0.0f : s * expf(m - block_max);
  const float sum = BlockSum(scaled, sum_scratch);
  const float inv_sum = 1.0f / sum;
  const float g = grad_scale / *count;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float p = expf(z[j] - block_max) * inv_sum;
    d[j] = RoundTo(round, g * (p - (j == y ? 1.0f : 0.0f)));
  }
  if (threadIdx.x == 0) row_loss[r] = logf(sum) - (z[y] - block_max);
}

__global__ void LossKernel(const float* row_loss, int64_t m, const float* count, float* loss) {
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < m; i += blockDim.x) s += row_loss[i];
  s = BlockSum(s, scratch);
  if (threadIdx.x == 0) *loss = *count > 0.0f ? s / *count : 0.0f;
}

}  // namespace

int64_t SoftmaxCrossEntropyScratchFloats(int64_t m) { return m + 1; }

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* targets, int64_t m, int64_t v,
                                      int32_t ignore_index, float grad_scale, float* scratch, float* loss,
                                      float* dlogits, FloatType round, cudaStream_t stream) {
  float* count = scratch;
  float* row_loss = scratch + 1;
  CountKernel<<<1, kReduceThreads, 0, stream>>>(targets, m, v, ignore_index, count);
  if (m > 0) {
    RowKernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(logits, targets, v, ignore_index, grad_scale, count,
                                                                 row_loss, dlogits, round);
  }
  LossKernel<<<1, kReduceThreads, 0, stream>>>(row_loss, m, count, loss);
  return cudaGetLastError();
}

}  // namespace ringmaster::kernels
