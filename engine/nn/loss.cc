#include "engine/nn/loss.h"

#include "common/status_macros.h"

namespace ringmaster::engine::nn {
namespace {

absl::Status CheckLogitsTargets(const Tensor& logits, const Tensor& targets) {
  if (!logits.defined() || logits.rank() < 1 || logits.dtype() == DType::kI32 || logits.dim(-1) == 0)
    return absl::InvalidArgumentError("cross-entropy: logits must be a float tensor [..., V] with V > 0");
  if (!targets.defined() || targets.dtype() != DType::kI32)
    return absl::InvalidArgumentError("cross-entropy: targets must be i32");
  if (targets.numel() * logits.dim(-1) != logits.numel())
    return absl::InvalidArgumentError(absl::StrCat("cross-entropy: ", targets.numel(), " targets for logits ",
                                                   ShapeString(logits.shape())));
  return absl::OkStatus();
}

}  // namespace

absl::Status SoftmaxCrossEntropy::CheckTargetRange(const Tensor& targets, int64_t classes) const {
  if (targets.device() != Device::kCpu) return absl::OkStatus();  // user input: checked where it is cheap
  for (int64_t i = 0; i < targets.numel(); ++i) {
    const int32_t t = targets.i32()[i];
    if (t != ignore_index_ && (t < 0 || t >= classes))
      return absl::InvalidArgumentError(absl::StrCat("cross-entropy: target ", t, " outside [0, ", classes, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> SoftmaxCrossEntropy::Forward(const Tensor& logits, const Tensor& targets, bool training,
                                                    float grad_scale, int micro_batch) {
  RETURN_IF_ERROR(CheckLogitsTargets(logits, targets));
  RETURN_IF_ERROR(CheckTargetRange(targets, logits.dim(-1)));
  Tensor loss = backend_.Empty({1});
  Tensor dlogits = backend_.EmptyActivation(logits.shape());
  backend_.SoftmaxCrossEntropy(logits, targets, ignore_index_, grad_scale, loss, dlogits);
  if (training) dlogits_.Put(micro_batch, dlogits);
  return loss;
}

absl::StatusOr<Tensor> SoftmaxCrossEntropy::ForwardModel(Model& model, const Tensor& x, const Tensor& targets,
                                                         bool training, float grad_scale, int begin, int end,
                                                         int micro_batch) {
  if (end < 0) end = model.num_blocks();
  auto* head = begin < end && end <= model.num_blocks() ? dynamic_cast<LossHead*>(&model.block(end - 1)) : nullptr;
  if (head == nullptr) {
    ASSIGN_OR_RETURN(Tensor logits, model.Forward(x, training, begin, end, micro_batch));
    return Forward(logits, targets, training, grad_scale, micro_batch);
  }
  if (!targets.defined() || targets.dtype() != DType::kI32)
    return absl::InvalidArgumentError("cross-entropy: targets must be i32");
  RETURN_IF_ERROR(CheckTargetRange(targets, head->num_classes()));
  ASSIGN_OR_RETURN(Tensor h, model.Forward(x, training, begin, end - 1, micro_batch));
  ASSIGN_OR_RETURN(Tensor loss, head->ForwardLoss(h, targets, ignore_index_, grad_scale, training, micro_batch));
  if (training) dlogits_.Put(micro_batch, Tensor());
  return loss;
}

absl::StatusOr<Tensor> SoftmaxCrossEntropy::Backward(int micro_batch) {
  return dlogits_.Take(micro_batch, "SoftmaxCrossEntropy");
}

absl::StatusOr<int64_t> CountCorrect(Backend& backend, const Tensor& logits, const Tensor& targets) {
  RETURN_IF_ERROR(CheckLogitsTargets(logits, targets));
  const std::vector<float> l = backend.ToHost(logits).ToVector();
  const Tensor t = backend.ToHost(targets);
  const int64_t v = logits.dim(-1), m = logits.numel() / v;
  int64_t correct = 0;
  for (int64_t i = 0; i < m; ++i) {
    const float* row = l.data() + i * v;
    int64_t best = 0;
    for (int64_t j = 1; j < v; ++j)
      if (row[j] > row[best]) best = j;
    correct += best == t.i32()[i];
  }
  return correct;
}

}  // namespace ringmaster::engine::nn
