#ifndef RINGMASTER_ENGINE_CORE_CPU_BACKEND_H_
#define RINGMASTER_ENGINE_CORE_CPU_BACKEND_H_

// CpuBackend: the reference backend, multi-threaded over a ThreadPool. Stores
// every float tensor as f32 and rounds op outputs (and GEMM operands) to the
// compute dtype, accumulating in fp32. GEMMs go through OpenBLAS running on
// one thread per call; the backend partitions the work over its own pool
// (fixed chunk boundaries), so results are bitwise reproducible for the same
// thread count. Construction sets OpenBLAS to one thread process-wide.
// Not thread-safe (see Backend); one instance per trainer thread.
//
// The implementation is split by op family: cpu_backend.cc (memory,
// elementwise), cpu_gemm.cc, cpu_conv.cc, cpu_norm.cc, cpu_activation.cc,
// cpu_attention.cc, cpu_embedding_loss.cc, cpu_fused.cc.

#include <memory>

#include "engine/core/backend.h"
#include "engine/core/host_allocator.h"
#include "engine/core/thread_pool.h"

namespace ringmaster::engine {

struct CpuBackendConfig {
  int num_threads = 0;                // <= 0: std::thread::hardware_concurrency()
  DType compute_dtype = DType::kF32;  // kF32, kF16 or kBF16
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendConfig& config = {});

  Device device() const override { return Device::kCpu; }
  DType compute_dtype() const override { return compute_dtype_; }
  ThreadPool& pool() { return pool_; }

  Tensor Empty(const Shape& shape, DType dtype = DType::kF32) override;
  Tensor Zeros(const Shape& shape, DType dtype = DType::kF32) override;
  void CopyFromHost(const Tensor& host_src, const Tensor& dst) override;
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

  // The fused ops run unfused (cpu_fused.cc), bitwise the sequences backend.h names.
  void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                         const Tensor& y) override;
  void AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta, float eps,
                           const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd) override;
  void AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                            const Tensor& rstd, const Tensor& residual, const Tensor& dx, const Tensor& dgamma,
                            const Tensor& dbeta) override;

  void EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) override;
  void EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte, const Tensor& dwpe) override;

  // Saves the softmax probabilities [B, n_head, T, T].
  Shape AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const override;
  void AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& saved, const Tensor& out) override;
  void AttentionBackward(const Tensor& qkv, const Tensor& saved, const Tensor& out, const Tensor& dout,
                         int64_t n_head, const Tensor& dqkv) override;

  void CountTargets(const Tensor& targets, int32_t ignore_index, const Tensor& count) override;
  void SoftmaxCrossEntropyChunk(const Tensor& logits, int64_t v, const Tensor& targets, int32_t ignore_index,
                                const Tensor& count, float grad_scale, const Tensor& loss,
                                const Tensor* dlogits) override;

 private:
  // A rounded copy of x when the compute dtype is not f32, else x itself.
  Tensor RoundedOperand(const Tensor& x);
  // Rounds x in place to the compute dtype (no-op for f32), in parallel.
  void RoundOutput(float* x, int64_t n);

  DType compute_dtype_;
  ThreadPool pool_;
  std::shared_ptr<HostAllocator> allocator_ = std::make_shared<HostAllocator>();
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_CPU_BACKEND_H_
