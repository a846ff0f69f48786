#include "engine/gpu/gpu_info.h"

#include "gtest/gtest.h"

namespace ringmaster::engine::gpu {
namespace {

TEST(GpuInfoTest, UuidIsFormattedLikeNvidiaSmi) {
  std::array<unsigned char, 16> bytes = {0x8f, 0x6e, 0x2c, 0x1a, 0x0b, 0x3d, 0x4e, 0x5f,
                                         0x9a, 0x7b, 0x1c, 0x2d, 0x3e, 0x4f, 0x5a, 0x6b};
  EXPECT_EQ(FormatGpuUuid(bytes), "GPU-8f6e2c1a-0b3d-4e5f-9a7b-1c2d3e4f5a6b");
  std::array<unsigned char, 16> zeros{};
  EXPECT_EQ(FormatGpuUuid(zeros), "GPU-00000000-0000-0000-0000-000000000000");
}

TEST(GpuInfoTest, PciBusIdIsFormattedLikeNvidiaSmi) {
  EXPECT_EQ(FormatPciBusId(0, 0x18, 0), "00000000:18:00.0");
  EXPECT_EQ(FormatPciBusId(1, 0xab, 0x1f), "00000001:AB:1F.0");
}

TEST(GpuInfoTest, DescribeGpuIsOneLine) {
  GpuInfo gpu;
  gpu.index = 3;
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.uuid = "GPU-8f6e2c1a-0b3d-4e5f-9a7b-1c2d3e4f5a6b";
  gpu.total_memory_bytes = 80ull << 30;
  gpu.compute_capability_major = 9;
  gpu.compute_capability_minor = 0;
  gpu.pci_bus_id = "00000000:18:00.0";
  EXPECT_EQ(DescribeGpu(gpu),
            "3: NVIDIA H100 80GB HBM3 (GPU-8f6e2c1a-0b3d-4e5f-9a7b-1c2d3e4f5a6b, 80.0 GiB, sm_90, "
            "00000000:18:00.0)");
}

TEST(GpuInfoTest, DiscoverGpusNeverFailsTheWorker) {
  absl::StatusOr<GpuDiscovery> discovery = DiscoverGpus();
  ASSERT_TRUE(discovery.ok()) << discovery.status();
#if !RINGMASTER_TEST_HAVE_CUDA
  EXPECT_TRUE(discovery->gpus.empty());
  EXPECT_EQ(discovery->reason, "no CUDA in this build (built CPU-only); GPUs are not looked for");
#else
  if (discovery->gpus.empty()) {
    EXPECT_NE(discovery->reason, "") << "an empty list must say why";
  } else {
    EXPECT_EQ(discovery->reason, "");
  }
  for (size_t i = 0; i < discovery->gpus.size(); ++i) {
    const GpuInfo& gpu = discovery->gpus[i];
    EXPECT_EQ(gpu.index, static_cast<int>(i));
    EXPECT_EQ(gpu.uuid.size(), 40u) << gpu.uuid;
    EXPECT_EQ(gpu.uuid.rfind("GPU-", 0), 0u) << gpu.uuid;
    EXPECT_EQ(gpu.pci_bus_id.size(), 16u) << gpu.pci_bus_id;
    EXPECT_GT(gpu.total_memory_bytes, 0u);
    EXPECT_GE(gpu.compute_capability_major, 5);
    EXPECT_FALSE(gpu.name.empty());
  }
#endif
}

}  // namespace
}  // namespace ringmaster::engine::gpu
