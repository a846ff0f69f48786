// Links the CUDA runtime, cuBLASLt, cuDNN and NCCL, holds the loaded ones to
// the floors of engine/gpu/library_floors.h (what the code calls, and the
// library majors the binaries link; each floor's reason is written there),
// and runs one kernel of our own where a device is present.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <vector>

#include "engine/gpu/library_floors.h"
#include "engine/kernels/smoke.h"
#include "gtest/gtest.h"

namespace ringmaster::kernels {
namespace {

namespace floors = ::ringmaster::engine::gpu;

TEST(CudaSmokeTest, LoadedLibrariesMeetTheFloors) {
  // cuBLASLt: the major the binaries link (libcublasLt.so.13); the epilogues
  // used (BIAS, GELU_AUX_BIAS) are older.
  EXPECT_GE(cublasLtGetVersion(), floors::kMinCublasLtVersion);
  // cuDNN 9.0: its legacy API, cudnnGetLastErrorString, its status codes.
  EXPECT_GE(cudnnGetVersion(), floors::kMinCudnnVersion);
  // NCCL 2.18: ncclCommSplit.
  int nccl_version = 0;
  ASSERT_EQ(ncclGetVersion(&nccl_version), ncclSuccess);
  EXPECT_GE(nccl_version, floors::kMinNcclVersion);
  // The runtime the binaries link (libcudart.so.13): any 13.x.
  int runtime_version = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&runtime_version), cudaSuccess);
  EXPECT_GE(runtime_version, floors::kMinRuntimeVersion);
}

TEST(CudaSmokeTest, DriverSupportsTheToolkitsMajorVersion) {
  int driver_version = 0;
  ASSERT_EQ(cudaDriverGetVersion(&driver_version), cudaSuccess);
  if (driver_version == 0) GTEST_SKIP() << "no NVIDIA driver loaded: the driver's version not checked";
  // Built by the CUDA 13 toolkit: the driver must support CUDA 13.0 (minor
  // version compatibility covers 13.x).
  EXPECT_GE(driver_version, floors::kMinDriverVersion);
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
