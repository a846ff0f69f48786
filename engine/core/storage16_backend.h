#ifndef RINGMASTER_ENGINE_CORE_STORAGE16_BACKEND_H_
#define RINGMASTER_ENGINE_CORE_STORAGE16_BACKEND_H_

// Storage16Backend (tests only): the CUDA backend's storage contract on the
// host. Activations are stored in 16 bits (activation_dtype() = the compute
// dtype, f16 or bf16), as a CUDA backend with mixed precision stores them,
// and every op runs on an inner CpuBackend of that compute dtype: the op's
// activation arguments are CHECKed to be 16-bit, widened into f32 host copies
// for the CPU op, and its activation outputs narrowed back; every other float
// argument (parameters, gradients, statistics, masks, the loss) must be f32.
// GEMM and convolution weights must arrive as their 16-bit operand copies
// (Parameter::operand()).
//
// The CPU rounds every activation value it writes to the compute dtype, so
// the narrowing is exact and a model on this backend computes bitwise what it
// computes on the plain CpuBackend. Hence the test it serves: a layer that
// passes an f32 tensor where an activation belongs, or an f32 master weight
// to a GEMM, fails a CHECK; a stale operand copy (one not refreshed after the
// values changed) or an activation allocated in the wrong dtype changes the
// losses. What it cannot see is the CUDA kernels themselves (host emulation
// and the GPU tests do).
//
// Not thread-safe (see Backend). Slow: a copy of every activation per op.

#include <memory>

#include "engine/core/backend.h"
#include "engine/core/cpu_backend.h"

namespace ringmaster::engine {

class Storage16Backend final : public Backend {
 public:
  // compute_dtype: kF16 or kBF16.
  Storage16Backend(DType compute_dtype, int num_threads);

  Device device() const override { return Device::kCpu; }
  DType compute_dtype() const override { return inner_.compute_dtype(); }
  DType activation_dtype() const override { return inner_.compute_dtype(); }
  // Ops run so far (a test can check that a path ran at all).
  int64_t ops() const { return ops_; }

  Tensor Empty(const Shape& shape, DType dtype = DType::kF32) override { return inner_.Empty(shape, dtype); }
  Tensor Zeros(const Shape& shape, DType dtype = DType::kF32) override { return inner_.Zeros(shape, dtype); }
  void CopyFromHost(const Tensor& host_src, const Tensor& dst) override { inner_.CopyFromHost(host_src, dst); }
  void CopyToHost(const Tensor& src, const Tensor& host_dst) override { inner_.CopyToHost(src, host_dst); }
  void Copy(const Tensor& src, const Tensor& dst) override { inner_.Copy(src, dst); }

  void Fill(const Tensor& x, float value) override { inner_.Fill(x, value); }
  void Scale(const Tensor& x, float alpha) override { inner_.Scale(x, alpha); }
  void Axpy(float alpha, const Tensor& x, const Tensor& y) override { inner_.Axpy(alpha, x, y); }
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void Convert(const Tensor& src, const Tensor& dst) override { inner_.Convert(src, dst); }
  void RoundInPlace(const Tensor& x, DType dtype) override { inner_.RoundInPlace(x, dtype); }
  void NonFiniteCheck(const std::vector<Tensor>& tensors, const Tensor& flag) override {
    inner_.NonFiniteCheck(tensors, flag);
  }

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

  void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                         const Tensor& y) override;
  void AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta, float eps,
                           const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd) override;
  void AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                            const Tensor& rstd, const Tensor& residual, const Tensor& dx, const Tensor& dgamma,
                            const Tensor& dbeta) override;

  void EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) override;
  void EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte, const Tensor& dwpe) override;

  Shape AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const override {
    return inner_.AttentionSavedShape(B, n_head, T, head_size);
  }
  void AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& saved, const Tensor& out) override;
  void AttentionBackward(const Tensor& qkv, const Tensor& saved, const Tensor& out, const Tensor& dout,
                         int64_t n_head, const Tensor& dqkv) override;

  void CountTargets(const Tensor& targets, int32_t ignore_index, const Tensor& count) override {
    inner_.CountTargets(targets, ignore_index, count);
  }
  void SoftmaxCrossEntropyChunk(const Tensor& logits, int64_t v, const Tensor& targets, int32_t ignore_index,
                                const Tensor& count, float grad_scale, const Tensor& loss,
                                const Tensor* dlogits) override;

 private:
  class Op;  // one op's widened inputs and narrowed outputs

  CpuBackend inner_;
  int64_t ops_ = 0;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_STORAGE16_BACKEND_H_
