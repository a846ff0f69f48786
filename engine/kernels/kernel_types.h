#ifndef RINGMASTER_ENGINE_KERNELS_KERNEL_TYPES_H_
#define RINGMASTER_ENGINE_KERNELS_KERNEL_TYPES_H_

// Types shared by the backend kernels' plain C++ launcher headers. The
// launchers take raw device pointers, element counts and a cudaStream_t, and
// return the cudaError_t of the launch (cudaGetLastError()).

#include <cuda_runtime.h>

#include <cstdint>

namespace ringmaster::kernels {

// Float formats a kernel stores or rounds to. The values equal
// engine::DType's (kF32, kF16, kBF16), which the backend static_asserts.
enum class FloatType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_KERNEL_TYPES_H_
