// DiscoverGpus through the CUDA runtime (builds with CUDA). Querying device
// properties creates no context, so the worker can run it beside its trainers.
#include <cuda_runtime.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/core/cuda_status.h"
#include "engine/gpu/gpu_info.h"

namespace ringmaster::engine::gpu {
namespace {

absl::StatusOr<GpuInfo> QueryGpu(int index) {
  cudaDeviceProp prop;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, index));
  GpuInfo gpu;
  gpu.index = index;
  gpu.name = prop.name;
  std::array<unsigned char, 16> uuid;
  std::copy(prop.uuid.bytes, prop.uuid.bytes + 16, uuid.begin());
  gpu.uuid = FormatGpuUuid(uuid);
  gpu.total_memory_bytes = prop.totalGlobalMem;
  gpu.compute_capability_major = prop.major;
  gpu.compute_capability_minor = prop.minor;
  gpu.pci_bus_id = FormatPciBusId(prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  return gpu;
}

}  // namespace

absl::StatusOr<GpuDiscovery> DiscoverGpus() {
  GpuDiscovery discovery;
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // No driver, a driver older than the runtime, or no device: a CPU node.
    discovery.reason = absl::StrCat("the CUDA runtime finds no usable GPU: ", cudaGetErrorName(error), ": ",
                                    cudaGetErrorString(error));
    return discovery;
  }
  if (count == 0) {
    discovery.reason = "the CUDA runtime finds no GPU (check CUDA_VISIBLE_DEVICES)";
    return discovery;
  }
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<GpuInfo> gpu = QueryGpu(i);
    if (!gpu.ok()) {
      return absl::InternalError(absl::StrCat("querying GPU ", i, " of ", count, ": ", gpu.status().message()));
    }
    discovery.gpus.push_back(*std::move(gpu));
  }
  return discovery;
}

}  // namespace ringmaster::engine::gpu
