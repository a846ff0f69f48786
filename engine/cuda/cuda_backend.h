#ifndef RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_H_
#define RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_H_

// CudaBackend: every Backend op on one CUDA device, enqueued on one compute
// stream. GEMMs go through cuBLASLt, convolutions and batch norm through
// cuDNN, attention through cuDNN's fused flash attention (16-bit) or our
// flash kernels, the rest through our kernels (engine/kernels/).
//
// Real mixed precision: with compute_dtype f16/bf16, activations are STORED
// in that dtype (activation_dtype()), GEMMs and convolutions read 16-bit
// operands (activations, and the weights' operand copies) on tensor cores
// with fp32 accumulation, and our kernels load 16 bits, compute in fp32 and
// store 16 bits. Parameters, their gradients (accumulated in fp32, without
// rounding each contribution as the CPU does), optimizer state, statistics
// and the loss stay f32. With compute_dtype f32 everything is f32 (TF32
// GEMMs and convolutions with tf32). How close each op stays to its CPU twin
// is stated in the GPU tests (engine/cuda/*_test.cc).
//
// Errors: ops are void (Backend contract). The first CUDA/cuBLAS/cuDNN failure
// is kept, with its file:line, and every later op becomes a no-op until
// Synchronize() returns it (and clears it). Shape/dtype mismatches are caller
// bugs and CHECK, as on the CPU.
//
// Not thread-safe (one thread drives it), except allocator(), which is.
// Implementation split by op family: cuda_backend.cc (construction, memory,
// elementwise), cuda_gemm.cc, cuda_conv.cc, cuda_norm.cc, cuda_nn_ops.cc.

#include <cuda_runtime.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/cuda/caching_allocator.h"

namespace ringmaster::engine {

struct CudaBackendConfig {
  int device = 0;                     // cudaSetDevice(device) on Create
  DType compute_dtype = DType::kF32;  // kF32, kF16, kBF16
  bool tf32 = false;                  // fp32 GEMMs/convs on TF32 tensor cores
};

class CudaBackend final : public Backend {
 public:
  // FAILED_PRECONDITION (named clearly) without a device/driver;
  // INVALID_ARGUMENT for a compute_dtype that is not f32/f16/bf16.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendConfig& config);
  ~CudaBackend() override;

  Device device() const override { return Device::kCuda; }
  DType compute_dtype() const override { return config_.compute_dtype; }
  DType activation_dtype() const override { return config_.compute_dtype; }
  const CudaBackendConfig& config() const { return config_; }
  cudaStream_t compute_stream() const;
  CachingAllocator& allocator();

  // Waits for the compute stream and returns the first CUDA/cuBLAS/cuDNN error
  // any op hit since the last call (later ops were no-ops), then clears it.
  absl::Status Synchronize() override;

  Tensor Empty(const Shape& shape, DType dtype = DType::kF32) override;
  Tensor Zeros(const Shape& shape, DType dtype = DType::kF32) override;
  // Asynchronous on the compute stream (the host tensor must stay alive and
  // unchanged until the stream reaches the copy; pageable memory makes CUDA
  // stage it, so in practice the call returns after the copy-out of the host).
  void CopyFromHost(const Tensor& host_src, const Tensor& dst) override;
  // Synchronises the compute stream: host_dst holds the values on return.
  void CopyToHost(const Tensor& src, const Tensor& host_dst) override;
  void Copy(const Tensor& src, const Tensor& dst) override;

  void Fill(const Tensor& x, float value) override;
  void Scale(const Tensor& x, float alpha) override;
  void Axpy(float alpha, const Tensor& x, const Tensor& y) override;
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void Convert(const Tensor& src, const Tensor& dst) override;
  void RoundInPlace(const Tensor& x, DType dtype) override;
  void NonFiniteCheck(const std::vector<Tensor>& tensors, const Tensor& flag) override;

  void Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta, const Tensor& c,
            const Tensor* bias = nullptr) override;
  void GemmBatched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                   const Tensor& c) override;
  void BiasGrad(const Tensor& dy, const Tensor& dbias) override;

  void ReluForward(const Tensor& x, const Tensor& y) override;
  void ReluBackward(const Tensor& y, const Tensor& dy, const Tensor& dx) override;
  void GeluForward(const Tensor& x, const Tensor& y) override;
  void GeluBackward(const Tensor& x, const Tensor& dy, const Tensor& dx) override;
  void DropoutForward(const Tensor& x, float p, uint64_t key, const Tensor& mask, const Tensor& y) override;
  void DropoutBackward(const Tensor& dy, const Tensor& mask, const Tensor& dx) override;

  void Conv2dForward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dGeometry& g,
                     const Tensor& y) override;
  void Conv2dBackward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dGeometry& g, const Tensor* dx,
                      const Tensor& dw, const Tensor* dbias) override;
  void MaxPool2dForward(const Tensor& x, int64_t k, int64_t s, const Tensor& y) override;
  void MaxPool2dBackward(const Tensor& x, const Tensor& dy, int64_t k, int64_t s, const Tensor& dx) override;

  void BatchNorm2dForwardTrain(const Tensor& x, const Tensor& gamma, const Tensor& beta, float momentum, float eps,
                               const Tensor& running_mean, const Tensor& running_var, const Tensor& y,
                               const Tensor& save_mean, const Tensor& save_invstd) override;
  void BatchNorm2dForwardEval(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& running_mean,
                              const Tensor& running_var, float eps, const Tensor& y) override;
  void BatchNorm2dBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& save_mean,
                           const Tensor& save_invstd, const Tensor& dx, const Tensor& dgamma,
                           const Tensor& dbeta) override;
  void LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& y,
                        const Tensor& mean, const Tensor& rstd) override;
  void LayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) override;

  // cuBLASLt's GELU_AUX_BIAS epilogue (cuda_gemm.cc: when it falls back, and
  // why 16-bit y is within tolerance of the CPU twin, not bitwise).
  void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                         const Tensor& y) override;
  // One kernel each (kernels/layernorm.cu), rounding where the CPU twin rounds.
  void AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta, float eps,
                           const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd) override;
  void AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                            const Tensor& rstd, const Tensor& residual, const Tensor& dx, const Tensor& dgamma,
                            const Tensor& dbeta) override;

  void EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) override;
  void EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte, const Tensor& dwpe) override;

  // 16-bit: cuDNN's fused flash attention (tensor cores) where it takes the
  // shape, else our flash kernels for head sizes up to 64, both saving the
  // logsumexp [B, n_head, T]; f32: our flash kernels (head sizes up to 64).
  // Otherwise cuBLASLt GEMMs around a causal softmax, saving the
  // probabilities [B, n_head, T, T] (f32).
  Shape AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const override;
  void AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& saved, const Tensor& out) override;
  void AttentionBackward(const Tensor& qkv, const Tensor& saved, const Tensor& out, const Tensor& dout,
                         int64_t n_head, const Tensor& dqkv) override;

  void CountTargets(const Tensor& targets, int32_t ignore_index, const Tensor& count) override;
  void SoftmaxCrossEntropyChunk(const Tensor& logits, int64_t v, const Tensor& targets, int32_t ignore_index,
                                const Tensor& count, float grad_scale, const Tensor& loss,
                                const Tensor* dlogits) override;

 private:
  // Whether cuDNN's fused attention runs this shape (16-bit, an engine found).
  bool CudnnAttention(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const;

  struct Impl;  // handles (cuBLASLt, cuDNN), descriptor caches, the stream
  CudaBackend(const CudaBackendConfig& config, std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  CudaBackendConfig config_;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CUDA_CUDA_BACKEND_H_
