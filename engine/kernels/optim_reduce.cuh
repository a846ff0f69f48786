// Device helpers of the optimizer kernels (grad_norm, optim_update): chunk
// bounds and a deterministic fp64 block sum (a fixed shuffle tree per warp,
// then the warps in order). Includes device_util.cuh and the plain C++ table
// types; the includer provides the CUDA built-ins (host harness or nvcc).
#ifndef RINGMASTER_ENGINE_KERNELS_OPTIM_REDUCE_CUH_
#define RINGMASTER_ENGINE_KERNELS_OPTIM_REDUCE_CUH_

#include "engine/kernels/device_util.cuh"
#include "engine/kernels/optim_multi_tensor.h"

namespace ringmaster::kernels {

// The chunk this block handles: its entry and the element range [begin, end).
struct ChunkRange {
  const MultiTensorEntry* e;
  int64_t begin, end;
};

__device__ inline ChunkRange BlockChunk(const MultiTensorTable& table) {
  const TensorChunk c = table.chunks[blockIdx.x];
  const MultiTensorEntry* e = &table.entries[c.entry];
  const int64_t end = c.start + kOptimChunkElements < e->n ? c.start + kOptimChunkElements : e->n;
  return ChunkRange{e, c.start, end};
}

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024); the
// result is valid in thread 0. Same inputs, same order, same result. Every
// thread of the block must call.
__device__ inline double BlockSum(double v) {
  __shared__ double warp_sums[32];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0) {
    const int warps = blockDim.x >> 5;
    for (int w = 0; w < warps; ++w) total += warp_sums[w];
  }
  __syncthreads();  // warp_sums may be reused by a following call
  return total;
}

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_OPTIM_REDUCE_CUH_
