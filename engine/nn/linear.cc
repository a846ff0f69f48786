#include "engine/nn/linear.h"

#include "common/status_macros.h"
#include "engine/nn/init.h"

namespace ringmaster::engine::nn {

Linear::Linear(Backend& backend, std::string prefix, int64_t in_features, int64_t out_features, bool bias,
               uint64_t seed)
    : backend_(backend), prefix_(std::move(prefix)), in_(in_features), out_(out_features), has_bias_(bias) {
  weight_ = MakeParameter(backend, prefix_ + ".weight", {out_, in_}, /*decay=*/true, /*operand=*/true);
  InitUniformFanIn(backend, weight_, in_, seed);
  if (has_bias_) {
    bias_ = MakeParameter(backend, prefix_ + ".bias", {out_}, /*decay=*/false, /*operand=*/true);
    InitUniformFanIn(backend, bias_, in_, seed);
  }
}

absl::StatusOr<Tensor> Linear::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(prefix_, x, -1, -1, in_));
  Shape out_shape = x.shape();
  out_shape.back() = out_;
  Tensor y = backend_.EmptyActivation(out_shape);
  backend_.Gemm(false, true, 1.0f, x, weight_.operand(), 0.0f, y, has_bias_ ? &bias_.operand() : nullptr);
  if (training) inputs_.Put(micro_batch, x);
  return y;
}

absl::StatusOr<Tensor> Linear::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor x, inputs_.Take(micro_batch, prefix_));
  Shape out_shape = x.shape();
  out_shape.back() = out_;
  if (dy.shape() != out_shape)
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": grad ", ShapeString(dy.shape()), " for output ",
                                                   ShapeString(out_shape)));
  // dW[out, in] += dy[M, out]^T @ x[M, in];  db += colsum(dy);  dx = dy @ W.
  backend_.Gemm(true, false, 1.0f, dy, x, 1.0f, weight_.grad);
  if (has_bias_) backend_.BiasGrad(dy, bias_.grad);
  Tensor dx = backend_.EmptyActivation(x.shape());
  backend_.Gemm(false, false, 1.0f, dy, weight_.operand(), 0.0f, dx);
  return dx;
}

absl::StatusOr<Tensor> Linear::ForwardGelu(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(prefix_, x, -1, -1, in_));
  if (!has_bias_) return absl::FailedPreconditionError(absl::StrCat(prefix_, ": ForwardGelu needs a bias"));
  Shape out_shape = x.shape();
  out_shape.back() = out_;
  Tensor pre = backend_.EmptyActivation(out_shape);
  Tensor y = backend_.EmptyActivation(out_shape);
  backend_.LinearGeluForward(x, weight_.operand(), bias_.operand(), pre, y);
  if (training) {
    inputs_.Put(micro_batch, x);
    pre_gelu_.Put(micro_batch, std::move(pre));
  }
  return y;
}

absl::StatusOr<Tensor> Linear::BackwardGelu(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor pre, pre_gelu_.Take(micro_batch, prefix_));
  if (dy.shape() != pre.shape())
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": grad ", ShapeString(dy.shape()), " for output ",
                                                   ShapeString(pre.shape())));
  Tensor dpre = backend_.EmptyActivation(pre.shape());
  backend_.GeluBackward(pre, dy, dpre);
  return Backward(dpre, micro_batch);
}

ParameterList Linear::Parameters() {
  ParameterList list = {&weight_};
  if (has_bias_) list.push_back(&bias_);
  return list;
}

}  // namespace ringmaster::engine::nn
