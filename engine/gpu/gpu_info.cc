// The build-independent half of gpu_info.h: formatting.
#include "absl/strings/str_format.h"
#include "engine/gpu/gpu_info.h"

namespace ringmaster::engine::gpu {

std::string FormatGpuUuid(const std::array<unsigned char, 16>& b) {
  return absl::StrFormat(
      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
      b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

std::string FormatPciBusId(int domain, int bus, int device) {
  return absl::StrFormat("%08X:%02X:%02X.0", static_cast<unsigned>(domain), static_cast<unsigned>(bus),
                         static_cast<unsigned>(device));
}

std::string DescribeGpu(const GpuInfo& gpu) {
  return absl::StrFormat("%d: %s (%s, %.1f GiB, sm_%d%d, %s)", gpu.index, gpu.name, gpu.uuid,
                         static_cast<double>(gpu.total_memory_bytes) / (1ull << 30), gpu.compute_capability_major,
                         gpu.compute_capability_minor, gpu.pci_bus_id);
}

}  // namespace ringmaster::engine::gpu
