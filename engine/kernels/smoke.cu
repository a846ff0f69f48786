// Build smoke test for the CUDA toolchain: one kernel, compiled for sm_80 and
// sm_90 (+ PTX), launched through a plain C++ launcher.
#include "engine/kernels/smoke.h"

#include <cuda_runtime.h>

namespace ringmaster::kernels {
namespace {

__global__ void AxpyKernel(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace

int LaunchSmokeAxpy(int n, float a, const float* x, float* y, void* stream) {
  constexpr int kThreads = 256;
  int blocks = (n + kThreads - 1) / kThreads;
  AxpyKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, a, x, y);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace ringmaster::kernels
