#include "engine/parallel/stage_partition_cost.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/core/cpu_backend.h"

namespace ringmaster::engine::parallel {
namespace {

constexpr double kNormFlopsPerElement = 5.0;
constexpr double kLossFlopsPerElement = 5.0;

double N(const Tensor& t) { return static_cast<double>(t.numel()); }

// M, N, K of c = op(a) @ op(b) with a and b viewed as 2-D (all but the last dim merged).
double GemmFlops(bool trans_a, const Tensor& a, const Tensor& c) {
  const double a_rows = N(a) / a.dim(-1);
  const double k = trans_a ? a_rows : static_cast<double>(a.dim(-1));
  return 2.0 * N(c) * k;
}

double ConvFlops(const Tensor& x, const Tensor& w, const Tensor& y) {
  // y [N, O, OH, OW]; each output element sums C * kh * kw products.
  return 2.0 * N(y) * x.dim(1) * w.dim(2) * w.dim(3);
}

double AttentionFlops(const Tensor& qkv) {
  // q k^T and att v over [B, T, T] per channel: 2 GEMMs of B * T * T * C.
  const double b = qkv.dim(0), t = qkv.dim(1), c = qkv.dim(2) / 3.0;
  return 4.0 * b * t * t * c;
}

// Softmax elements B * n_head * T * T, whatever the backend saves for backward.
double AttentionScores(const Tensor& qkv, int64_t n_head) {
  const double b = qkv.dim(0), t = qkv.dim(1);
  return b * static_cast<double>(n_head) * t * t;
}

}  // namespace

void FlopCountingBackend::Scale(const Tensor& x, float alpha) {
  Count(N(x));
  inner_.Scale(x, alpha);
}
void FlopCountingBackend::Axpy(float alpha, const Tensor& x, const Tensor& y) {
  Count(2 * N(y));
  inner_.Axpy(alpha, x, y);
}
void FlopCountingBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  Count(N(out));
  inner_.Add(a, b, out);
}
void FlopCountingBackend::NonFiniteCheck(const std::vector<Tensor>& tensors, const Tensor& flag) {
  for (const Tensor& t : tensors) Count(N(t));
  inner_.NonFiniteCheck(tensors, flag);
}
void FlopCountingBackend::Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                               const Tensor& c, const Tensor* bias) {
  Count(GemmFlops(trans_a, a, c) + (bias != nullptr ? N(c) : 0.0));
  inner_.Gemm(trans_a, trans_b, alpha, a, b, beta, c, bias);
}
void FlopCountingBackend::GemmBatched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b,
                                      float beta, const Tensor& c) {
  // Per batch entry a is [M, K] or [K, M]; c is [batch, M, N].
  const double batch = c.dim(0), m = c.dim(1);
  const double k = N(a) / batch / m;
  Count(2.0 * N(c) * k);
  inner_.GemmBatched(trans_a, trans_b, alpha, a, b, beta, c);
}
void FlopCountingBackend::BiasGrad(const Tensor& dy, const Tensor& dbias) {
  Count(N(dy));
  inner_.BiasGrad(dy, dbias);
}
void FlopCountingBackend::ReluForward(const Tensor& x, const Tensor& y) {
  Count(N(y));
  inner_.ReluForward(x, y);
}
void FlopCountingBackend::ReluBackward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  Count(N(dx));
  inner_.ReluBackward(y, dy, dx);
}
void FlopCountingBackend::GeluForward(const Tensor& x, const Tensor& y) {
  Count(N(y));
  inner_.GeluForward(x, y);
}
void FlopCountingBackend::GeluBackward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  Count(N(dx));
  inner_.GeluBackward(x, dy, dx);
}
void FlopCountingBackend::DropoutForward(const Tensor& x, float p, uint64_t key, const Tensor& mask, const Tensor& y) {
  Count(N(y));
  inner_.DropoutForward(x, p, key, mask, y);
}
void FlopCountingBackend::DropoutBackward(const Tensor& dy, const Tensor& mask, const Tensor& dx) {
  Count(N(dx));
  inner_.DropoutBackward(dy, mask, dx);
}
void FlopCountingBackend::Conv2dForward(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv2dGeometry& g,
                                        const Tensor& y) {
  Count(ConvFlops(x, w, y));
  inner_.Conv2dForward(x, w, bias, g, y);
}
void FlopCountingBackend::Conv2dBackward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dGeometry& g,
                                         const Tensor* dx, const Tensor& dw, const Tensor* dbias) {
  Count(2.0 * ConvFlops(x, w, dy));
  inner_.Conv2dBackward(x, w, dy, g, dx, dw, dbias);
}
void FlopCountingBackend::MaxPool2dForward(const Tensor& x, int64_t k, int64_t s, const Tensor& y) {
  Count(N(x));
  inner_.MaxPool2dForward(x, k, s, y);
}
void FlopCountingBackend::MaxPool2dBackward(const Tensor& x, const Tensor& dy, int64_t k, int64_t s,
                                            const Tensor& dx) {
  Count(N(x));
  inner_.MaxPool2dBackward(x, dy, k, s, dx);
}
void FlopCountingBackend::BatchNorm2dForwardTrain(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                  float momentum, float eps, const Tensor& running_mean,
                                                  const Tensor& running_var, const Tensor& y, const Tensor& save_mean,
                                                  const Tensor& save_invstd) {
  Count(kNormFlopsPerElement * N(x));
  inner_.BatchNorm2dForwardTrain(x, gamma, beta, momentum, eps, running_mean, running_var, y, save_mean,
                                 save_invstd);
}
void FlopCountingBackend::BatchNorm2dForwardEval(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                 const Tensor& running_mean, const Tensor& running_var, float eps,
                                                 const Tensor& y) {
  Count(kNormFlopsPerElement * N(x));
  inner_.BatchNorm2dForwardEval(x, gamma, beta, running_mean, running_var, eps, y);
}
void FlopCountingBackend::BatchNorm2dBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                              const Tensor& save_mean, const Tensor& save_invstd, const Tensor& dx,
                                              const Tensor& dgamma, const Tensor& dbeta) {
  Count(2.0 * kNormFlopsPerElement * N(x));
  inner_.BatchNorm2dBackward(x, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}
void FlopCountingBackend::LayerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                                           const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  Count(kNormFlopsPerElement * N(x));
  inner_.LayerNormForward(x, gamma, beta, eps, y, mean, rstd);
}
void FlopCountingBackend::LayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                            const Tensor& rstd, const Tensor& dx, const Tensor& dgamma,
                                            const Tensor& dbeta) {
  Count(2.0 * kNormFlopsPerElement * N(x));
  inner_.LayerNormBackward(x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
}
// The fused ops count what their unfused sequences count, so a stage's cost
// does not depend on which form the model calls.
void FlopCountingBackend::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                                            const Tensor& y) {
  Count(GemmFlops(false, x, pre) + N(pre) + N(y));
  inner_.LinearGeluForward(x, w, bias, pre, y);
}
void FlopCountingBackend::AddLayerNormForward(const Tensor& a, const Tensor& b, const Tensor& gamma,
                                              const Tensor& beta, float eps, const Tensor& sum, const Tensor& y,
                                              const Tensor& mean, const Tensor& rstd) {
  Count((1.0 + kNormFlopsPerElement) * N(sum));
  inner_.AddLayerNormForward(a, b, gamma, beta, eps, sum, y, mean, rstd);
}
void FlopCountingBackend::AddLayerNormBackward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                               const Tensor& mean, const Tensor& rstd, const Tensor& residual,
                                               const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  Count((1.0 + 2.0 * kNormFlopsPerElement) * N(x));
  inner_.AddLayerNormBackward(x, dy, gamma, mean, rstd, residual, dx, dgamma, dbeta);
}
void FlopCountingBackend::EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                                           const Tensor& out) {
  Count(N(out));
  inner_.EmbeddingForward(tokens, wte, wpe, out);
}
void FlopCountingBackend::EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                                            const Tensor& dwpe) {
  Count(2.0 * N(dout));
  inner_.EmbeddingBackward(tokens, dout, dwte, dwpe);
}
Shape FlopCountingBackend::AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const {
  return inner_.AttentionSavedShape(B, n_head, T, head_size);
}
void FlopCountingBackend::AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& saved,
                                           const Tensor& out) {
  Count(AttentionFlops(qkv) + kNormFlopsPerElement * AttentionScores(qkv, n_head));
  inner_.AttentionForward(qkv, n_head, saved, out);
}
void FlopCountingBackend::AttentionBackward(const Tensor& qkv, const Tensor& saved, const Tensor& out,
                                            const Tensor& dout, int64_t n_head, const Tensor& dqkv) {
  Count(2.0 * AttentionFlops(qkv) + kNormFlopsPerElement * AttentionScores(qkv, n_head));
  inner_.AttentionBackward(qkv, saved, out, dout, n_head, dqkv);
}
void FlopCountingBackend::SoftmaxCrossEntropyChunk(const Tensor& logits, int64_t v, const Tensor& targets,
                                                   int32_t ignore_index, const Tensor& count, float grad_scale,
                                                   const Tensor& loss, const Tensor* dlogits) {
  Count(kLossFlopsPerElement * N(logits) / static_cast<double>(logits.dim(-1)) * static_cast<double>(v));
  inner_.SoftmaxCrossEntropyChunk(logits, v, targets, ignore_index, count, grad_scale, loss, dlogits);
}

Tensor SampleInput(const nn::ModelConfig& config, int64_t batch, int64_t seq_len) {
  if (config.kind == nn::ModelKind::kGpt) {
    return Tensor::Zeros({batch, seq_len > 0 ? seq_len : config.block_size}, DType::kI32);
  }
  return Tensor::Zeros({batch, config.input_channels, config.input_height, config.input_width});
}

absl::StatusOr<std::vector<double>> EstimateBlockFlops(const nn::ModelConfig& config, const Tensor& sample_input) {
  CpuBackendConfig cpu_config;
  cpu_config.num_threads = 1;
  CpuBackend cpu(cpu_config);
  FlopCountingBackend counter(cpu);
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::BuildModel(config, counter));
  std::vector<double> flops;
  Tensor h = sample_input;
  for (int i = 0; i < model->num_blocks(); ++i) {
    const double before = counter.flops();
    ASSIGN_OR_RETURN(h, model->block(i).Forward(h, /*training=*/false, 0));
    flops.push_back(counter.flops() - before);
  }
  return flops;
}

absl::StatusOr<StagePartition> PartitionModel(const nn::ModelConfig& config, int num_blocks, int num_stages,
                                              const std::vector<int>& boundaries, int64_t seq_len) {
  if (!boundaries.empty()) return PartitionFromBoundaries(num_blocks, num_stages, boundaries);
  ASSIGN_OR_RETURN(std::vector<double> flops, EstimateBlockFlops(config, SampleInput(config, 1, seq_len)));
  if (static_cast<int>(flops.size()) != num_blocks)
    return absl::InvalidArgumentError(absl::StrCat("pipeline: the config builds ", flops.size(),
                                                   " blocks, the model has ", num_blocks));
  return PartitionBalanced(flops, num_stages);
}

}  // namespace ringmaster::engine::parallel
