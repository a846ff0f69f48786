// DiscoverGpus against the CUDA runtime's own answers: on a machine without a
// device (or driver) it must find nothing and name the runtime's error; with
// devices it must report each one as the runtime does.
#include <cuda_runtime.h>

#include <cctype>
#include <string>

#include "engine/gpu/gpu_info.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::gpu {
namespace {

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

TEST(GpuInfoCudaTest, WithoutADeviceTheListIsEmptyAndSaysWhy) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaSuccess && count > 0) GTEST_SKIP() << count << " CUDA device(s) present: covered below";
  absl::StatusOr<GpuDiscovery> discovery = DiscoverGpus();
  ASSERT_TRUE(discovery.ok()) << discovery.status();
  EXPECT_TRUE(discovery->gpus.empty());
  if (error != cudaSuccess) {
    EXPECT_EQ(discovery->reason, std::string("the CUDA runtime finds no usable GPU: ") +
                                     cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
  } else {
    EXPECT_EQ(discovery->reason, "the CUDA runtime finds no GPU (check CUDA_VISIBLE_DEVICES)");
  }
}

TEST(GpuInfoCudaTest, EachDeviceIsReportedAsTheRuntimeSeesIt) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    GTEST_SKIP() << "no CUDA device present: device properties not exercised";
  }
  absl::StatusOr<GpuDiscovery> discovery = DiscoverGpus();
  ASSERT_TRUE(discovery.ok()) << discovery.status();
  ASSERT_EQ(discovery->gpus.size(), static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const GpuInfo& gpu = discovery->gpus[i];
    cudaDeviceProp prop;
    ASSERT_EQ(cudaGetDeviceProperties(&prop, i), cudaSuccess);
    EXPECT_EQ(gpu.name, prop.name);
    EXPECT_EQ(gpu.total_memory_bytes, prop.totalGlobalMem);
    EXPECT_EQ(gpu.compute_capability_major, prop.major);
    EXPECT_EQ(gpu.compute_capability_minor, prop.minor);
    char bus_id[32] = {0};
    ASSERT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i), cudaSuccess);
    // The runtime prints a shorter domain ("0000:18:00.0"); the bus part must agree.
    std::string runtime = Upper(bus_id);
    ASSERT_GE(runtime.size(), 7u);
    EXPECT_EQ(gpu.pci_bus_id.substr(gpu.pci_bus_id.size() - 7), runtime.substr(runtime.size() - 7))
        << gpu.pci_bus_id << " vs " << bus_id;
    EXPECT_EQ(gpu.uuid.rfind("GPU-", 0), 0u);
    std::printf("%s\n", DescribeGpu(gpu).c_str());
  }
}

}  // namespace
}  // namespace ringmaster::engine::gpu
