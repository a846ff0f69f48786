// The toolchain smoke test's kernel (smoke.h): y[i] = a * x[i] + y[i], one
// element per thread, blocks of kSmokeThreads, ceil(n / kSmokeThreads) blocks.
//
// Included by smoke.cu and by the host emulation tests; includes only
// device_util.cuh (the includer provides the CUDA built-ins).
#ifndef RINGMASTER_ENGINE_KERNELS_SMOKE_KERNELS_CUH_
#define RINGMASTER_ENGINE_KERNELS_SMOKE_KERNELS_CUH_

#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::smoke {

constexpr int kSmokeThreads = 256;

__global__ void __launch_bounds__(kSmokeThreads) AxpyKernel(int n, float a, const float* x, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace ringmaster::kernels::smoke

#endif  // RINGMASTER_ENGINE_KERNELS_SMOKE_KERNELS_CUH_
