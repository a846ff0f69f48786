// Build smoke test for the CUDA toolchain: one kernel (smoke_kernels.cuh),
// compiled for sm_80 and sm_90 (+ PTX), launched through a plain C++ launcher.
#include "engine/kernels/smoke.h"

#include <cuda_runtime.h>

#include "engine/kernels/smoke_kernels.cuh"

namespace ringmaster::kernels {

int LaunchSmokeAxpy(int n, float a, const float* x, float* y, void* stream) {
  if (n <= 0) return static_cast<int>(cudaSuccess);
  const int blocks = (n + smoke::kSmokeThreads - 1) / smoke::kSmokeThreads;
  smoke::AxpyKernel<<<blocks, smoke::kSmokeThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, a, x, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ringmaster::kernels
