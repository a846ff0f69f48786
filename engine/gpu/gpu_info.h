#ifndef RINGMASTER_ENGINE_GPU_GPU_INFO_H_
#define RINGMASTER_ENGINE_GPU_GPU_INFO_H_

// GPU discovery for the worker: what the node reports to the coordinator when
// it registers (ARCHITECTURE.md §5). Plain C++: every build compiles against
// this header. With CUDA (gpu_info_cuda.cc) it asks the CUDA runtime; in a
// CPU-only build (gpu_info_none.cc) it finds nothing and says why.
//
// Thread-safe (the functions keep no state).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::engine::gpu {

struct GpuInfo {
  // The CUDA ordinal among the devices visible to this process, in the order
  // of CUDA_DEVICE_ORDER (the worker should set PCI_BUS_ID, nvidia-smi's
  // order). Pin a trainer to a GPU by its uuid (CUDA_VISIBLE_DEVICES accepts it).
  int index = 0;
  std::string name;                // "NVIDIA H100 80GB HBM3"
  std::string uuid;                // "GPU-8f6e2c1a-...", as nvidia-smi prints it
  uint64_t total_memory_bytes = 0;
  int compute_capability_major = 0;  // 9 for Hopper
  int compute_capability_minor = 0;
  std::string pci_bus_id;          // "00000000:18:00.0", as nvidia-smi prints it
};

struct GpuDiscovery {
  std::vector<GpuInfo> gpus;
  // Why `gpus` is empty ("this build has no CUDA", "no NVIDIA driver: ...");
  // empty when GPUs were found.
  std::string reason;
};

// The GPUs of this machine. No GPU, no driver, or no CUDA in this build are
// not errors: an empty list and the reason (a CPU-only node still works).
// Errors (INTERNAL) only when a device that was counted cannot be queried.
absl::StatusOr<GpuDiscovery> DiscoverGpus();

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lower-case hex) of a 16-byte UUID.
std::string FormatGpuUuid(const std::array<unsigned char, 16>& bytes);
// "DDDDDDDD:BB:DD.0" (upper-case hex), nvidia-smi's form of a PCI address.
std::string FormatPciBusId(int domain, int bus, int device);
// One line for logs: "0: NVIDIA H100 80GB HBM3 (GPU-..., 79.1 GiB, sm_90, 00000000:18:00.0)".
std::string DescribeGpu(const GpuInfo& gpu);

}  // namespace ringmaster::engine::gpu

#endif  // RINGMASTER_ENGINE_GPU_GPU_INFO_H_
