#ifndef RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_TEST_UTIL_H_
#define RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_TEST_UTIL_H_

// The fixture of the CudaBackend tests: every op against its CPU twin
// (CpuBackend with the same compute dtype) on fresh random inputs, outputs
// poisoned with NaN before the op. Tolerances, as a relative L2 norm
// ||gpu - cpu|| / ||cpu||:
//   fp32          1e-5
//   fp32 + TF32   1e-3 (GEMMs and convolutions on TF32 tensor cores)
//   bf16, fp16    1e-2 (outputs rounded to 16 bits on both sides; a value
//                       near a rounding boundary may land one ulp apart)
// Inputs are rounded to the compute dtype first, as a model's activations are.
// Without a device every test skips with a message.

#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/core/cpu_backend.h"
#include "engine/core/test_util.h"
#include "engine/cuda/cuda_backend.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::testing {

struct Mode {
  DType dtype;
  bool tf32;
  double tol;
  const char* name;
};

inline std::vector<Mode> AllModes() {
  return {{DType::kF32, false, 1e-5, "fp32"},
          {DType::kF32, true, 1e-3, "tf32"},
          {DType::kBF16, false, 1e-2, "bf16"},
          {DType::kF16, false, 1e-2, "fp16"}};
}

inline bool HaveDevice() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

// ||got - want|| / ||want|| (0 when both are zero; inf when sizes differ or got has NaN).
inline double RelNorm(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0.0, ref = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    ref += static_cast<double>(want[i]) * want[i];
  }
  if (ref == 0.0) return diff == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(diff / ref);
}

class CudaBackendTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: CudaBackend op tests not run";
    const Mode m = GetParam();
    auto gpu = CudaBackend::Create({0, m.dtype, m.tf32});
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::move(*gpu);
    cpu_ = std::make_unique<CpuBackend>(CpuBackendConfig{2, m.dtype});
  }
  void TearDown() override {
    if (gpu_ != nullptr) EXPECT_TRUE(gpu_->Synchronize().ok());
  }

  double tol() const { return GetParam().tol; }
  // Random host values in [lo, hi), rounded to the compute dtype.
  Tensor Rand(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    Tensor t = RandomTensor(shape, seed, lo, hi);
    cpu_->RoundInPlace(t, GetParam().dtype);
    return t;
  }
  Tensor Up(const Tensor& host) { return gpu_->ToDevice(host); }
  // A device f32 tensor full of NaN (so an output the op forgets stays NaN).
  Tensor Poisoned(const Shape& shape) {
    Tensor t = gpu_->Empty(shape);
    gpu_->Fill(t, std::numeric_limits<float>::quiet_NaN());
    return t;
  }
  std::vector<float> Down(const Tensor& device) { return gpu_->ToHost(device).ToVector(); }
  // A host copy (for the CPU twin to overwrite or accumulate into).
  static Tensor Clone(const Tensor& host) { return Tensor::FromVector(host.shape(), host.ToVector()); }

  void ExpectClose(const char* what, const Tensor& device, const Tensor& host, double tolerance) {
    const double rel = RelNorm(Down(device), host.ToVector());
    EXPECT_LE(rel, tolerance) << what << " (" << GetParam().name << "): relative norm " << rel;
  }
  void ExpectClose(const char* what, const Tensor& device, const Tensor& host) {
    ExpectClose(what, device, host, tol());
  }

  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuBackend> cpu_;
};

inline std::string ModeName(const ::testing::TestParamInfo<Mode>& info) { return info.param.name; }

}  // namespace ringmaster::engine::testing

#endif  // RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_TEST_UTIL_H_
