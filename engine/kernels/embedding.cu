// Embedding kernels, then their launchers.
#include "engine/kernels/embedding.h"
#include "engine/kernels/kernel_util.cuh"

namespace ringmaster::kernels {
namespace {

// Vocabulary partitions of the scatter-add: partition p owns the rows of dwte
// whose token id is p modulo this, so threads never share an element.
constexpr int kVocabPartitions = 64;
constexpr int kColumnsPerBlock = 128;

__global__ void EmbeddingForwardKernel(const int32_t* tokens, const float* wte, const float* wpe, int64_t bt,
                                       int64_t t, int64_t v, int64_t c, float* out, FloatType round) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < bt * c;
       idx += int64_t{blockDim.x} * gridDim.x) {
    const int64_t i = idx / c, j = idx % c;
    const int32_t tok = tokens[i];
    if (tok < 0 || tok >= v) __trap();
    const float e = RoundTo(round, wte[tok * c + j]);
    const float p = RoundTo(round, wpe[(i % t) * c + j]);
    out[idx] = RoundTo(round, e + p);
  }
}

// Grid (column blocks, kVocabPartitions).
__global__ void TokenScatterKernel(const int32_t* tokens, const float* dout, int64_t bt, int64_t v, int64_t c,
                                   float* dwte) {
  const int64_t j = blockIdx.x * int64_t{kColumnsPerBlock} + threadIdx.x;
  const int part = blockIdx.y;
  if (j >= c) return;
  for (int64_t i = 0; i < bt; ++i) {
    const int32_t tok = tokens[i];
    if (tok < 0 || tok >= v) __trap();
    if (tok % kVocabPartitions != part) continue;
    dwte[tok * c + j] += dout[i * c + j];
  }
}

__global__ void PositionSumKernel(const float* dout, int64_t b, int64_t t, int64_t c, float* dwpe) {
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < t * c;
       idx += int64_t{blockDim.x} * gridDim.x) {
    float acc = dwpe[idx];
    for (int64_t bi = 0; bi < b; ++bi) acc += dout[bi * t * c + idx];
    dwpe[idx] = acc;
  }
}

}  // namespace

cudaError_t LaunchEmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int64_t b, int64_t t,
                                   int64_t v, int64_t c, float* out, FloatType round, cudaStream_t stream) {
  if (b * t * c <= 0) return cudaSuccess;
  EmbeddingForwardKernel<<<GridFor(b * t * c), kThreads, 0, stream>>>(tokens, wte, wpe, b * t, t, v, c, out, round);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBackward(const int32_t* tokens, const float* dout, int64_t b, int64_t t, int64_t v,
                                    int64_t c, float* dwte, float* dwpe, cudaStream_t stream) {
  if (b * t * c <= 0) return cudaSuccess;
  dim3 grid(static_cast<unsigned>((c + kColumnsPerBlock - 1) / kColumnsPerBlock), kVocabPartitions);
  TokenScatterKernel<<<grid, kColumnsPerBlock, 0, stream>>>(tokens, dout, b * t, v, c, dwte);
  PositionSumKernel<<<GridFor(t * c), kThreads, 0, stream>>>(dout, b, t, c, dwpe);
  return cudaGetLastError();
}

}  // namespace ringmaster::kernels
