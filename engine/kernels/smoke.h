#ifndef RINGMASTER_ENGINE_KERNELS_SMOKE_H_
#define RINGMASTER_ENGINE_KERNELS_SMOKE_H_

namespace ringmaster::kernels {

// y[i] = a * x[i] + y[i] for i < n, on device pointers, enqueued on `stream`
// (a cudaStream_t; nullptr = default stream). Returns the cudaError_t of the launch.
int LaunchSmokeAxpy(int n, float a, const float* x, float* y, void* stream);

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_SMOKE_H_
