#ifndef RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_IMPL_H_
#define RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_IMPL_H_

// CudaBackend's state, shared by its implementation files (internal to
// engine/cuda): the device, the compute stream, the allocator, the cuBLASLt
// and cuDNN handles with their plan caches, and the first error kept.

#include <cublasLt.h>
#include <cudnn.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "engine/core/check.h"
#include "engine/core/cuda_status.h"
#include "engine/core/tensor.h"
#include "engine/cuda/caching_allocator.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cudnn_descriptors.h"
#include "engine/cuda/cudnn_sdpa.h"
#include "engine/cuda/gemm_plan_cache.h"
#include "engine/kernels/kernel_types.h"

namespace ringmaster::engine {


// A row-major (batched) GEMM on raw device pointers:
// c[i] = alpha * op(a[i]) op(b[i]) + beta * c[i] (+ bias on every row), i < batch.
// a and b are in ab_type, c (and bias) in c_type: with a 16-bit compute dtype
// the operands are 16-bit (activations, or the weights' operand copies) and c
// is 16-bit (an activation) or f32 (a parameter gradient, or attention
// scores); tensor cores multiply and accumulate in fp32 either way.
struct GemmCall {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  DType ab_type = DType::kF32, c_type = DType::kF32;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;  // lda: row length of a as stored
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  const void* bias = nullptr;  // [n] in c_type, or null (batch == 1 only)
  // With a bias, batch 1 and beta 0: c = gelu(product + bias) and gelu_aux
  // [m, n] (dense, c_type) = product + bias, through cuBLASLt's
  // CUBLASLT_EPILOGUE_GELU_AUX_BIAS. n must be a multiple of 8 (the aux
  // leading dimension's rule). UNIMPLEMENTED when cuBLASLt has no algorithm
  // for it (the caller falls back to the unfused ops).
  void* gelu_aux = nullptr;
};

struct CudaBackend::Impl {
  CudaBackendConfig config;
  CudaStream stream;
  std::shared_ptr<CachingAllocator> allocator;
  cublasLtHandle_t cublaslt = nullptr;
  cudnnHandle_t cudnn = nullptr;
  void* gemm_workspace = nullptr;  // kGemmWorkspaceBytes from the allocator
  GemmPlanCache gemm_plans;
  ConvAlgoCache conv_algos;
  absl::Status error;  // the first failure since the last Synchronize()

  static constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

  ~Impl();

  uintptr_t stream_key() const { return reinterpret_cast<uintptr_t>(stream.get()); }
  // Activations are stored in the compute dtype (real mixed precision).
  DType act_dtype() const { return config.compute_dtype; }
  kernels::FloatType act() const { return static_cast<kernels::FloatType>(config.compute_dtype); }
  bool mixed() const { return config.compute_dtype != DType::kF32; }

  // Runs `body` (returning absl::Status) on this backend's device unless an
  // earlier op failed; keeps its failure. The device is set on every op, so
  // the backend may be driven from another thread than the one that made it.
  template <typename Body>
  void Run(Body&& body) {
    if (!error.ok()) return;
    absl::Status status = EnterDevice();
    if (status.ok()) status = body();
    if (!status.ok()) error = std::move(status);
  }
  absl::Status EnterDevice() const;

  // A device tensor from the caching allocator, freed back to it when the
  // last handle goes.
  absl::StatusOr<Tensor> NewTensor(const Shape& shape, DType dtype);
  // Scratch of `floats` f32 elements (at least one).
  absl::StatusOr<Tensor> Scratch(int64_t floats);

  // One cuBLASLt call: 16-bit operands on tensor cores with fp32
  // accumulation, or fp32 (TF32 with config.tf32), through the plan cache.
  absl::Status Gemm(const GemmCall& call);
  // The cuDNN flash attention plans (cudnn_sdpa.h), per shape; built with
  // `cudnn`, so destroyed before it (~Impl).
  std::unique_ptr<CudnnSdpa> sdpa = std::make_unique<CudnnSdpa>();
  // Per attention shape (b, nh, t, hd): whether cuDNN runs it (decided once).
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, bool> cudnn_attention;
};

// The body of an op that is one CUDA call or kernel launch (cudaError_t):
// run through impl_->Run, its failure kept with the call's text and file:line.
#define RM_CUDA_OP(expr)                 \
  impl_->Run([&]() -> absl::Status {     \
    CUDA_RETURN_IF_ERROR(expr);          \
    return absl::OkStatus();             \
  })

// Device-tensor checks shared by the ops (violations are caller bugs).
inline void CheckDeviceF32(const Tensor& t, const char* what) {
  ENGINE_CHECK(t.defined() && t.dtype() == DType::kF32 && t.device() == Device::kCuda,
               "{} must be an f32 CUDA tensor", what);
}
// An activation argument: a CUDA tensor in the activation dtype.
inline void CheckDeviceAct(const Tensor& t, DType act, const char* what) {
  ENGINE_CHECK(t.defined() && t.dtype() == act && t.device() == Device::kCuda,
               "{} must be a {} CUDA tensor (an activation), got {} on {}", what, DTypeName(act),
               t.defined() ? DTypeName(t.dtype()) : "undefined", t.defined() ? DeviceName(t.device()) : "-");
}
inline kernels::FloatType AsFloatType(DType t) { return static_cast<kernels::FloatType>(t); }
inline cudaDataType_t CudaType(DType t) {
  return t == DType::kF16 ? CUDA_R_16F : t == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}
inline void CheckSameNumelCuda(const Tensor& a, const Tensor& b, const char* what) {
  ENGINE_CHECK(a.numel() == b.numel(), "{}: {} vs {}", what, ShapeString(a.shape()), ShapeString(b.shape()));
}
inline float* F32(const Tensor& t) { return static_cast<float*>(t.raw()); }
inline const int32_t* I32(const Tensor& t) { return static_cast<const int32_t*>(t.raw()); }

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_IMPL_H_
