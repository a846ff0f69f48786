// A build with CUDA: the CudaBackend of engine/cuda.
#include "engine/cuda/cuda_backend.h"
#include "engine/train/backend_factory.h"

namespace ringmaster::engine {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const TrainerConfig& config) {
  CudaBackendConfig cuda;
  cuda.device = config.device_index;
  cuda.compute_dtype = config.compute_dtype;
  cuda.tf32 = config.tf32;
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create(cuda);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(std::move(*backend));
}

void* BackendStream(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  return cuda != nullptr ? static_cast<void*>(cuda->compute_stream()) : nullptr;
}

DeviceMemoryStats BackendMemory(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) return {};
  const AllocatorStats stats = cuda->allocator().stats();
  return {static_cast<int64_t>(stats.allocated_bytes), static_cast<int64_t>(stats.reserved_bytes),
          static_cast<int64_t>(stats.peak_allocated_bytes)};
}

std::string BackendDeviceName(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  cudaDeviceProp properties;
  if (cuda == nullptr || cudaGetDeviceProperties(&properties, cuda->config().device) != cudaSuccess) return "";
  return properties.name;
}

}  // namespace ringmaster::engine
