#include "engine/nn/activation.h"

#include "common/status_macros.h"
#include "engine/core/random.h"

namespace ringmaster::engine::nn {
namespace {

absl::Status CheckGradShape(absl::string_view name, const Tensor& dy, const Shape& want) {
  if (dy.numel() != NumElements(want) || dy.dtype() == DType::kI32)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": grad ", ShapeString(dy.shape()), " for output ", ShapeString(want)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> Relu::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(name_, x, -1, 0, -1));
  Tensor y = backend_.EmptyActivation(x.shape());
  backend_.ReluForward(x, y);
  if (training) outputs_.Put(micro_batch, y);
  return y;
}

absl::StatusOr<Tensor> Relu::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor y, outputs_.Take(micro_batch, name_));
  RETURN_IF_ERROR(CheckGradShape(name_, dy, y.shape()));
  Tensor dx = backend_.EmptyActivation(y.shape());
  backend_.ReluBackward(y, dy, dx);
  return dx;
}

absl::StatusOr<Tensor> Gelu::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(name_, x, -1, 0, -1));
  Tensor y = backend_.EmptyActivation(x.shape());
  backend_.GeluForward(x, y);
  if (training) inputs_.Put(micro_batch, x);
  return y;
}

absl::StatusOr<Tensor> Gelu::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor x, inputs_.Take(micro_batch, name_));
  RETURN_IF_ERROR(CheckGradShape(name_, dy, x.shape()));
  Tensor dx = backend_.EmptyActivation(x.shape());
  backend_.GeluBackward(x, dy, dx);
  return dx;
}

Dropout::Dropout(Backend& backend, std::string name, float p, uint64_t seed)
    : backend_(backend), name_(std::move(name)), p_(p), seed_(seed ^ HashName(name_)) {}

absl::StatusOr<Tensor> Dropout::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(name_, x, -1, 0, -1));
  if (!training || p_ == 0.0f) {
    if (training) masks_.Put(micro_batch, Tensor());
    return x;
  }
  const uint64_t key = SplitMix64(seed_ ^ SplitMix64(key_ ^ SplitMix64(calls_++)));
  Tensor mask = backend_.Empty(x.shape()), y = backend_.EmptyActivation(x.shape());
  backend_.DropoutForward(x, p_, key, mask, y);
  masks_.Put(micro_batch, mask);
  return y;
}

absl::StatusOr<Tensor> Dropout::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor mask, masks_.Take(micro_batch, name_));
  if (!mask.defined()) return dy;
  RETURN_IF_ERROR(CheckGradShape(name_, dy, mask.shape()));
  Tensor dx = backend_.EmptyActivation(mask.shape());
  backend_.DropoutBackward(dy, mask, dx);
  return dx;
}

absl::StatusOr<Tensor> Flatten::Forward(const Tensor& x, bool training, int micro_batch) {
  if (!x.defined() || x.rank() < 1)
    return absl::InvalidArgumentError(absl::StrCat(name_, ": Flatten needs a batch dimension"));
  if (training) shapes_.Put(micro_batch, x.shape());
  const int64_t n = x.dim(0);
  return x.View({n, n == 0 ? 0 : x.numel() / n});
}

absl::StatusOr<Tensor> Flatten::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Shape shape, shapes_.Take(micro_batch, name_));
  RETURN_IF_ERROR(CheckGradShape(name_, dy, shape));
  return dy.View(shape);
}

}  // namespace ringmaster::engine::nn
