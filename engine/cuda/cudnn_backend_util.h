#ifndef RINGMASTER_ENGINE_CUDA_CUDNN_BACKEND_UTIL_H_
#define RINGMASTER_ENGINE_CUDA_CUDNN_BACKEND_UTIL_H_

// What cudnn_sdpa.cc (plans, engines, execution) and cudnn_sdpa_graph.cc
// (the operation graphs) share of cuDNN's backend API. Internal to the
// cudnn_sdpa library.

#include <cudnn.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/cuda_status.h"
#include "engine/cuda/cudnn_sdpa.h"  // CudnnBackendDesc

namespace ringmaster::engine::cudnn_backend {

using Desc = cudnnBackendDescriptor_t;

inline constexpr int64_t kAlignment = 16;  // bytes every tensor (and pointer) has

// Like CUDNN_RETURN_IF_ERROR, but cuDNN's NOT_SUPPORTED family (no engine,
// graph pattern, shape, architecture) returns UNIMPLEMENTED: the caller falls back.
inline absl::Status CudnnSupportStatus(cudnnStatus_t status, const char* expr, const char* file, int line) {
  absl::Status s = CudnnStatus(status, expr, file, line);
  if (!s.ok() && CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED) {
    return absl::UnimplementedError(s.message());
  }
  return s;
}

template <typename T>
cudnnStatus_t Set(Desc d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T& value) {
  return cudnnBackendSetAttribute(d, name, type, 1, &value);
}

inline absl::StatusOr<CudnnBackendDesc> Create(cudnnBackendDescriptorType_t type) {
  Desc raw = nullptr;
  CUDNN_RETURN_IF_ERROR(cudnnBackendCreateDescriptor(type, &raw));
  return CudnnBackendDesc(raw);
}

}  // namespace ringmaster::engine::cudnn_backend

// SDPA_RETURN_IF_UNSUPPORTED(cudnn call): returns CudnnSupportStatus's error.
#define SDPA_RETURN_IF_UNSUPPORTED(expr)                                                            \
  do {                                                                                              \
    absl::Status rm_sdpa_status_ =                                                                  \
        ::ringmaster::engine::cudnn_backend::CudnnSupportStatus((expr), #expr, __FILE__, __LINE__); \
    if (!rm_sdpa_status_.ok()) return rm_sdpa_status_;                                              \
  } while (0)

#endif  // RINGMASTER_ENGINE_CUDA_CUDNN_BACKEND_UTIL_H_
