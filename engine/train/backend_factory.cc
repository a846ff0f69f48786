#include "engine/train/backend_factory.h"

#include "engine/core/cpu_backend.h"

namespace ringmaster::engine {

// backend_factory_cuda.cc or backend_factory_none.cc.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const TrainerConfig& config);

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const TrainerConfig& config) {
  if (config.device == Device::kCuda) return CreateCudaBackend(config);
  CpuBackendConfig cpu;
  cpu.num_threads = config.threads;
  cpu.compute_dtype = config.compute_dtype;
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(cpu));
}

}  // namespace ringmaster::engine
