#ifndef RINGMASTER_ENGINE_TRAIN_BACKEND_FACTORY_H_
#define RINGMASTER_ENGINE_TRAIN_BACKEND_FACTORY_H_

// The trainer's backend for its config (CPU, or one CUDA device), and the
// few CUDA facts the trainer needs from it without including CUDA headers.
// In a build without CUDA, a CUDA config gives FAILED_PRECONDITION
// "built without CUDA" (backend_factory_none.cc).

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/train/trainer_config.h"

namespace ringmaster::engine {

// Device memory of a CUDA backend's caching allocator, in bytes.
struct DeviceMemoryStats {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
};

// CPU: a CpuBackend with config.threads and config.compute_dtype. CUDA: a
// CudaBackend on config.device_index with compute_dtype and tf32;
// FAILED_PRECONDITION without a device or without CUDA in this build.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const TrainerConfig& config);

// The backend's compute stream (a cudaStream_t); nullptr for the CPU.
void* BackendStream(Backend& backend);

// The backend's device memory; zeros for the CPU.
DeviceMemoryStats BackendMemory(Backend& backend);

// The CUDA device's name as the driver gives it ("NVIDIA H100 80GB HBM3");
// "" for the CPU.
std::string BackendDeviceName(Backend& backend);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_BACKEND_FACTORY_H_
