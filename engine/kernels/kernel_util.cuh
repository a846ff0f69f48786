// Launch helpers of the backend kernels (included by .cu files only): the
// storage-type dispatch and alignment checks. The device helpers the kernels
// use, and the grid arithmetic (GridFor, BlocksFor), are in device_util.cuh,
// which the host emulation harness compiles too.
#ifndef RINGMASTER_ENGINE_KERNELS_KERNEL_UTIL_CUH_
#define RINGMASTER_ENGINE_KERNELS_KERNEL_UTIL_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/device_util.cuh"
#include "engine/kernels/kernel_types.h"

namespace ringmaster::kernels {

// Calls f(T{}) with T the storage type of `t` (float, __half or
// __nv_bfloat16) and returns its result; cudaErrorInvalidValue for another t.
template <typename F>
cudaError_t WithStorage(FloatType t, F&& f) {
  switch (t) {
    case FloatType::kF32: return f(float{});
    case FloatType::kF16: return f(__half{});
    case FloatType::kBF16: return f(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

// True when every pointer is 16-byte aligned (null pointers count as aligned).
inline bool Aligned16() { return true; }
template <typename P, typename... Rest>
bool Aligned16(const P* p, const Rest*... rest) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && Aligned16(rest...);
}

}  // namespace ringmaster::kernels

#endif  // RINGMASTER_ENGINE_KERNELS_KERNEL_UTIL_CUH_
