#include "engine/nn/loss.h"

#include "common/status_macros.h"

namespace ringmaster::engine::nn {
namespace {

absl::Status CheckLogitsTargets(const Tensor& logits, const Tensor& targets) {
  if (!logits.defined() || logits.rank() < 1 || logits.dtype() != DType::kF32 || logits.dim(-1) == 0)
    return absl::InvalidArgumentError("cross-entropy: logits must be f32 [..., V] with V > 0");
  if (!targets.defined() || targets.dtype() != DType::kI32)
    return absl::InvalidArgumentError("cross-entropy: targets must be i32");
  if (targets.numel() * logits.dim(-1) != logits.numel())
    return absl::InvalidArgumentError(absl::StrCat("cross-entropy: ", targets.numel(), " targets for logits ",
                                                   ShapeString(logits.shape())));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> SoftmaxCrossEntropy::Forward(const Tensor& logits, const Tensor& targets, bool training,
                                                    float grad_scale, int micro_batch) {
  RETURN_IF_ERROR(CheckLogitsTargets(logits, targets));
  if (targets.device() == Device::kCpu) {  // target range is user input: check where it is cheap
    const int64_t v = logits.dim(-1);
    for (int64_t i = 0; i < targets.numel(); ++i) {
      const int32_t t = targets.i32()[i];
      if (t != ignore_index_ && (t < 0 || t >= v))
        return absl::InvalidArgumentError(absl::StrCat("cross-entropy: target ", t, " outside [0, ", v, ")"));
    }
  }
  Tensor loss = backend_.Empty({1});
  Tensor dlogits = backend_.Empty(logits.shape());
  backend_.SoftmaxCrossEntropy(logits, targets, ignore_index_, grad_scale, loss, dlogits);
  if (training) dlogits_.Put(micro_batch, dlogits);
  return loss;
}

absl::StatusOr<Tensor> SoftmaxCrossEntropy::Backward(int micro_batch) {
  return dlogits_.Take(micro_batch, "SoftmaxCrossEntropy");
}

absl::StatusOr<int64_t> CountCorrect(Backend& backend, const Tensor& logits, const Tensor& targets) {
  RETURN_IF_ERROR(CheckLogitsTargets(logits, targets));
  Tensor l = backend.ToHost(logits), t = backend.ToHost(targets);
  const int64_t v = l.dim(-1), m = l.numel() / v;
  int64_t correct = 0;
  for (int64_t i = 0; i < m; ++i) {
    const float* row = l.f32() + i * v;
    int64_t best = 0;
    for (int64_t j = 1; j < v; ++j)
      if (row[j] > row[best]) best = j;
    correct += best == t.i32()[i];
  }
  return correct;
}

}  // namespace ringmaster::engine::nn
