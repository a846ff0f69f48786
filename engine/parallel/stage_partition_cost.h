#ifndef RINGMASTER_ENGINE_PARALLEL_STAGE_PARTITION_COST_H_
#define RINGMASTER_ENGINE_PARALLEL_STAGE_PARTITION_COST_H_

// The per-block cost that balances pipeline stages: the floating-point
// operations of each block's forward, counted while a forward runs on a sample
// batch. Backward costs about twice its forward for GEMM- and conv-dominated
// blocks, so forward FLOPs rank blocks like their step time does; parameter
// counts do not (a CNN's conv stages are small in parameters and dominate the
// time; a GPT's embedding is large in parameters and costs nothing).
//
// Counting rules (FlopCountingBackend): GEMM 2*M*N*K (+ M*N for a bias);
// conv 2*N*O*OH*OW*C*kh*kw (backward: twice that); attention 4*B*T*T*C
// (backward: twice that); normalisation and the loss 5 per element; other
// elementwise ops 1 per output element; copies and fills 0. The counts are a
// pure function of the shapes, so every rank gets the same partition.
// Thread-safety: FlopCountingBackend is not thread-safe (as every Backend);
// the functions are.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/backend.h"
#include "engine/nn/model_factory.h"
#include "engine/parallel/stage_partition.h"

namespace ringmaster::engine::parallel {

// A Backend that runs every op on `inner` and adds the op's FLOPs to a counter.
class FlopCountingBackend final : public Backend {
 public:
  explicit FlopCountingBackend(Backend& inner) : inner_(inner) {}

  double flops() const { return flops_; }

  Device device() const override { return inner_.device(); }
  DType compute_dtype() const override { return inner_.compute_dtype(); }
  DType activation_dtype() const override { return inner_.activation_dtype(); }
  Tensor Empty(const Shape& shape, DType dtype = DType::kF32) override { return inner_.Empty(shape, dtype); }
  Tensor Zeros(const Shape& shape, DType dtype = DType::kF32) override { return inner_.Zeros(shape, dtype); }
  void CopyFromHost(const Tensor& host_src, const Tensor& dst) override { inner_.CopyFromHost(host_src, dst); }
  void CopyToHost(const Tensor& src, const Tensor& host_dst) override { inner_.CopyToHost(src, host_dst); }
  void Copy(const Tensor& src, const Tensor& dst) override { inner_.Copy(src, dst); }
  void Fill(const Tensor& x, float value) override { inner_.Fill(x, value); }
  void Scale(const Tensor& x, float alpha) override;
  void Axpy(float alpha, const Tensor& x, const Tensor& y) override;
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void Convert(const Tensor& src, const Tensor& dst) override { inner_.Convert(src, dst); }
  void RoundInPlace(const Tensor& x, DType dtype) override { inner_.RoundInPlace(x, dtype); }
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
  void LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                         const Tensor& y) override;
  void AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta, float eps,
                           const Tensor& sum, const Tensor& y, const Tensor& mean, const Tensor& rstd) override;
  void AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                            const Tensor& rstd, const Tensor& residual, const Tensor& dx, const Tensor& dgamma,
                            const Tensor& dbeta) override;
  void EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) override;
  void EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte, const Tensor& dwpe) override;
  Shape AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const override;
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
  void Count(double flops) { flops_ += flops; }

  Backend& inner_;
  double flops_ = 0.0;
};

// A zero input of `batch` samples for the model's first block: images f32
// [batch, C, H, W], or tokens i32 [batch, seq_len] (seq_len <= 0: block_size).
Tensor SampleInput(const nn::ModelConfig& config, int64_t batch, int64_t seq_len = 0);

// Builds the model of `config` on a counting single-threaded CPU backend and
// runs an eval forward of `sample_input` block by block; returns each block's
// FLOPs. Costs one extra copy of the model's parameters while it runs.
absl::StatusOr<std::vector<double>> EstimateBlockFlops(const nn::ModelConfig& config, const Tensor& sample_input);

// The stages of a pipeline of `num_stages` over the model of `config`, which
// has `num_blocks` blocks (Model::num_blocks()): from `boundaries` when given
// (the spec's stage_boundaries), else balanced by EstimateBlockFlops on a
// one-sample batch (of seq_len tokens for language models).
absl::StatusOr<StagePartition> PartitionModel(const nn::ModelConfig& config, int num_blocks, int num_stages,
                                              const std::vector<int>& boundaries, int64_t seq_len = 0);

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_STAGE_PARTITION_COST_H_
