// DiscoverGpus for builds without CUDA (`--config=cpu`, or no toolkit found).
#include "engine/gpu/gpu_info.h"

namespace ringmaster::engine::gpu {

absl::StatusOr<GpuDiscovery> DiscoverGpus() {
  GpuDiscovery discovery;
  discovery.reason = "no CUDA in this build (built CPU-only); GPUs are not looked for";
  return discovery;
}

}  // namespace ringmaster::engine::gpu
