// Links the CUDA runtime, cuBLASLt, cuDNN and NCCL, and runs one kernel of our
// own where a device is present.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <vector>

#include "engine/kernels/smoke.h"
#include "gtest/gtest.h"

namespace ringmaster::kernels {
namespace {

TEST(CudaSmokeTest, LibrariesLinkAndReportVersions) {
  EXPECT_GE(cublasLtGetVersion(), 130000u);
  EXPECT_GE(cudnnGetVersion(), 90000u);
  int nccl_version = 0;
  ASSERT_EQ(ncclGetVersion(&nccl_version), ncclSuccess);
  EXPECT_GE(nccl_version, 22800);
  int runtime_version = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&runtime_version), cudaSuccess);
  EXPECT_GE(runtime_version, 13000);
}

TEST(CudaSmokeTest, KernelRunsOnDevice) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    GTEST_SKIP() << "no CUDA device present: kernel launch not exercised";
  }
  constexpr int kN = 1000;
  std::vector<float> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  float *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dy, y.data(), kN * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(LaunchSmokeAxpy(kN, 2.0f, dx, dy, nullptr), 0);
  ASSERT_EQ(cudaMemcpy(y.data(), dy, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(y[i], 2.0f * i + 1.0f) << "at " << i;
  cudaFree(dx);
  cudaFree(dy);
}

}  // namespace
}  // namespace ringmaster::kernels
