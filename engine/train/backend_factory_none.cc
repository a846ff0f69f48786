// A build without CUDA: only the CPU backend.
#include "engine/train/backend_factory.h"

namespace ringmaster::engine {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const TrainerConfig& /*config*/) {
  return absl::FailedPreconditionError(
      "resources.device is cuda, but this trainer was built without CUDA (use resources.device: cpu or "
      "--device cpu)");
}

void* BackendStream(Backend& /*backend*/) { return nullptr; }

DeviceMemoryStats BackendMemory(Backend& /*backend*/) { return {}; }

std::string BackendDeviceName(Backend& /*backend*/) { return ""; }

}  // namespace ringmaster::engine
