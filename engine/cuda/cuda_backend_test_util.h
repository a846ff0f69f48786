#ifndef RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_TEST_UTIL_H_
#define RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_TEST_UTIL_H_

// The fixture of the CudaBackend tests: every op against its CPU twin
// (CpuBackend with the same compute dtype) on fresh random inputs, outputs
// poisoned with NaN before the op. Without a device every test skips with a
// message.
//
// Storage (engine/core/backend.h): with a bf16/fp16 compute dtype the GPU
// stores activations in that dtype (UpAct, PoisonedAct) and reads GEMM and
// convolution weights from 16-bit operand copies (UpOperand); parameters,
// their gradients, statistics, masks and the loss are f32 (Up, Poisoned). The
// CPU twin keeps f32 activations rounded to the compute dtype, so a 16-bit
// GPU output, widened to float (Down), is compared with the CPU's f32 output:
// both hold values of the same 16-bit format. Host inputs are rounded to the
// compute dtype first (Rand), as a model's activations and operands are, so
// converting them to 16 bits on the device is exact and both sides see the
// same values.
//
// Tolerances, as a relative L2 norm ||gpu - cpu|| / ||cpu||:
//   fp32          1e-5
//   fp32 + TF32   1e-3 (GEMMs and convolutions on TF32 tensor cores)
//   bf16, fp16    1e-2 (outputs rounded to 16 bits on both sides; a value
//                       near a rounding boundary may land one ulp apart)
// Statistics (norm means and rstds, BatchNorm's running and saved
// statistics), the loss and the dropout mask are f32 on both sides: 1e-5 in
// every mode (the mask bitwise).
//
// "+=" outputs (parameter gradients). The CPU rounds the new contribution of
// a GEMM, BiasGrad or convolution to the compute dtype before adding it in
// f32; the GPU adds it unrounded (cuBLASLt's fp32 C, our column-sum kernels),
// except the convolution's dw, which cuDNN writes in the filter's 16-bit type
// first, as the CPU rounds it. So a 16-bit-mode GPU gradient differs from the
// CPU's by at most the rounding of the contribution, u = 2^-8 (bf16) or 2^-11
// (fp16) of it: at most 3.9e-3 relative to the contribution, less relative to
// the accumulated total, inside the 1e-2 bound kept for 16-bit modes (fp32
// modes: 1e-5 or the op's own floor). Where the unrounded sum is the point (a
// GEMM into an f32 gradient, BiasGrad), the tests also hold the GPU to the
// exact double-precision result of the same inputs within
// ExactAccumulationTol() (1e-5; TF32 GEMMs 1e-3): the CPU twin, which rounds,
// misses that bound by about 20x (fp16) and 150x (bf16) on the same cases.
// Attention's logsumexp: cuda_attention_test.cc.

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
  const bool have = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (!have) (void)cudaGetLastError();  // no device is not an error for the next CUDA call
  return have;
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
    ASSERT_EQ(gpu_->activation_dtype(), m.dtype) << "activations are stored in the compute dtype";
    cpu_ = std::make_unique<CpuBackend>(CpuBackendConfig{2, m.dtype});
  }
  void TearDown() override {
    if (gpu_ != nullptr) {
      EXPECT_TRUE(gpu_->Synchronize().ok());
    }
  }

  double tol() const { return GetParam().tol; }
  bool sixteen_bit() const { return GetParam().dtype != DType::kF32; }
  // The dtype of the GPU's activations (and operand copies).
  DType act() const { return gpu_->activation_dtype(); }

  // How close a GPU "+=" output that is summed unrounded in fp32 stays to the
  // exact double-precision result: fp32 accumulation error only (products of
  // 16-bit values are exact in fp32), except TF32 GEMMs, whose operands lose
  // mantissa bits (the TF32 tolerance).
  double ExactAccumulationTol(bool gemm) const { return gemm && GetParam().tf32 ? 1e-3 : 1e-5; }

  // Random host values in [lo, hi), rounded to the compute dtype.
  Tensor Rand(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    Tensor t = RandomTensor(shape, seed, lo, hi);
    cpu_->RoundInPlace(t, GetParam().dtype);
    return t;
  }
  // An f32 device copy (parameters, gradients, statistics, masks).
  Tensor Up(const Tensor& host) { return gpu_->ToDevice(host); }
  // An activation on the device holding the host's (f32) values: uploaded,
  // then converted into activation_dtype() (exact for values already rounded
  // to the compute dtype; the f32 copy itself in fp32 modes).
  Tensor UpAct(const Tensor& host) {
    Tensor wide = Up(host);
    if (act() == DType::kF32) return wide;
    Tensor t = gpu_->EmptyActivation(host.shape());
    gpu_->Convert(wide, t);
    return t;
  }
  // A weight (or GEMM/convolution bias) as the ops read it: its operand copy
  // (Parameter::operand()), the rounded value in activation_dtype().
  Tensor UpOperand(const Tensor& host) { return UpAct(host); }
  // A device f32 tensor full of NaN (so an output the op forgets stays NaN).
  Tensor Poisoned(const Shape& shape) {
    Tensor t = gpu_->Empty(shape);
    gpu_->Fill(t, std::numeric_limits<float>::quiet_NaN());
    return t;
  }
  // An activation full of NaN (NaN converted into activation_dtype()).
  Tensor PoisonedAct(const Shape& shape) {
    Tensor nan = Poisoned(shape);
    if (act() == DType::kF32) return nan;
    Tensor t = gpu_->EmptyActivation(shape);
    gpu_->Convert(nan, t);
    return t;
  }
  // A device tensor of any float dtype, as floats (16-bit values widen exactly).
  std::vector<float> Down(const Tensor& device) { return gpu_->ToHost(device).ToVector(); }
  // A host copy (for the CPU twin to overwrite or accumulate into).
  static Tensor Clone(const Tensor& host) { return Tensor::FromVector(host.shape(), host.ToVector()); }

  void ExpectClose(const char* what, const Tensor& device, const Tensor& host, double tolerance) {
    ExpectClose(what, Down(device), host.ToVector(), tolerance);
  }
  void ExpectClose(const char* what, const Tensor& device, const Tensor& host) {
    ExpectClose(what, device, host, tol());
  }
  void ExpectClose(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                   double tolerance) {
    const double rel = RelNorm(got, want);
    EXPECT_LE(rel, tolerance) << what << " (" << GetParam().name << "): relative norm " << rel;
  }

  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuBackend> cpu_;
};

inline std::string ModeName(const ::testing::TestParamInfo<Mode>& info) { return info.param.name; }

}  // namespace ringmaster::engine::testing

#endif  // RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_TEST_UTIL_H_
