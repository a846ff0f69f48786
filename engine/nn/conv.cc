#include "engine/nn/conv.h"

#include "common/status_macros.h"
#include "engine/nn/init.h"

namespace ringmaster::engine::nn {
namespace {

absl::Status CheckGrad(absl::string_view name, const Tensor& dy, const Shape& want) {
  if (dy.shape() != want || dy.dtype() != DType::kF32)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": grad ", ShapeString(dy.shape()), " for output ", ShapeString(want)));
  return absl::OkStatus();
}

}  // namespace

Conv2d::Conv2d(Backend& backend, std::string prefix, int64_t in_channels, int64_t out_channels, int64_t kernel,
               int64_t stride, int64_t padding, bool bias, uint64_t seed)
    : backend_(backend), prefix_(std::move(prefix)), in_(in_channels), out_(out_channels), has_bias_(bias) {
  geometry_.kernel_h = geometry_.kernel_w = kernel;
  geometry_.stride_h = geometry_.stride_w = stride;
  geometry_.pad_h = geometry_.pad_w = padding;
  weight_ = MakeParameter(backend, prefix_ + ".weight", {out_, in_, kernel, kernel}, true);
  InitUniformFanIn(backend, weight_, in_ * kernel * kernel, seed);
  if (has_bias_) {
    bias_ = MakeParameter(backend, prefix_ + ".bias", {out_}, false);
    InitUniformFanIn(backend, bias_, in_ * kernel * kernel, seed);
  }
}

absl::StatusOr<Tensor> Conv2d::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(prefix_, x, 4, 1, in_));
  const int64_t oh = Conv2dGeometry::OutSize(x.dim(2), geometry_.kernel_h, geometry_.stride_h, geometry_.pad_h);
  const int64_t ow = Conv2dGeometry::OutSize(x.dim(3), geometry_.kernel_w, geometry_.stride_w, geometry_.pad_w);
  if (oh <= 0 || ow <= 0)
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": input ", ShapeString(x.shape()), " smaller than the kernel"));
  Tensor y = backend_.Empty({x.dim(0), out_, oh, ow});
  backend_.Conv2dForward(x, weight_.value, has_bias_ ? &bias_.value : nullptr, geometry_, y);
  if (training) inputs_.Put(micro_batch, x);
  return y;
}

absl::StatusOr<Tensor> Conv2d::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor x, inputs_.Take(micro_batch, prefix_));
  const int64_t oh = Conv2dGeometry::OutSize(x.dim(2), geometry_.kernel_h, geometry_.stride_h, geometry_.pad_h);
  const int64_t ow = Conv2dGeometry::OutSize(x.dim(3), geometry_.kernel_w, geometry_.stride_w, geometry_.pad_w);
  RETURN_IF_ERROR(CheckGrad(prefix_, dy, {x.dim(0), out_, oh, ow}));
  Tensor dx = backend_.Empty(x.shape());
  backend_.Conv2dBackward(x, weight_.value, dy, geometry_, &dx, weight_.grad, has_bias_ ? &bias_.grad : nullptr);
  return dx;
}

ParameterList Conv2d::Parameters() {
  ParameterList list = {&weight_};
  if (has_bias_) list.push_back(&bias_);
  return list;
}

absl::StatusOr<Tensor> MaxPool2d::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(name_, x, 4, 1, -1));
  if (x.dim(2) < kernel_ || x.dim(3) < kernel_)
    return absl::InvalidArgumentError(absl::StrCat(name_, ": input ", ShapeString(x.shape()), " smaller than the window"));
  Tensor y = backend_.Empty({x.dim(0), x.dim(1), (x.dim(2) - kernel_) / stride_ + 1, (x.dim(3) - kernel_) / stride_ + 1});
  backend_.MaxPool2dForward(x, kernel_, stride_, y);
  if (training) inputs_.Put(micro_batch, x);
  return y;
}

absl::StatusOr<Tensor> MaxPool2d::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor x, inputs_.Take(micro_batch, name_));
  RETURN_IF_ERROR(CheckGrad(name_, dy,
                            {x.dim(0), x.dim(1), (x.dim(2) - kernel_) / stride_ + 1, (x.dim(3) - kernel_) / stride_ + 1}));
  Tensor dx = backend_.Empty(x.shape());
  backend_.MaxPool2dBackward(x, dy, kernel_, stride_, dx);
  return dx;
}

BatchNorm2d::BatchNorm2d(Backend& backend, std::string prefix, int64_t channels, float momentum, float eps)
    : backend_(backend), prefix_(std::move(prefix)), channels_(channels), momentum_(momentum), eps_(eps) {
  weight_ = MakeParameter(backend, prefix_ + ".weight", {channels}, false);
  bias_ = MakeParameter(backend, prefix_ + ".bias", {channels}, false);
  InitConstant(backend, weight_.value, 1.0f);
  running_mean_ = {prefix_ + ".running_mean", backend.Zeros({channels})};
  running_var_ = {prefix_ + ".running_var", backend.Zeros({channels})};
  InitConstant(backend, running_var_.value, 1.0f);
  num_batches_tracked_ = {prefix_ + ".num_batches_tracked", backend.Zeros({})};
}

absl::StatusOr<Tensor> BatchNorm2d::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(prefix_, x, 4, 1, channels_));
  Tensor y = backend_.Empty(x.shape());
  if (!training) {
    backend_.BatchNorm2dForwardEval(x, weight_.value, bias_.value, running_mean_.value, running_var_.value, eps_, y);
    return y;
  }
  if (x.dim(0) * x.dim(2) * x.dim(3) < 2)
    return absl::InvalidArgumentError(
        absl::StrCat(prefix_, ": training needs more than one value per channel, got ", ShapeString(x.shape())));
  Cache c{x, backend_.Empty({channels_}), backend_.Empty({channels_})};
  backend_.BatchNorm2dForwardTrain(x, weight_.value, bias_.value, momentum_, eps_, running_mean_.value,
                                   running_var_.value, y, c.mean, c.invstd);
  // num_batches_tracked += 1 (a device-side add keeps the CUDA path sync-free).
  Tensor one = backend_.Empty({});
  backend_.Fill(one, 1.0f);
  backend_.Axpy(1.0f, one, num_batches_tracked_.value);
  caches_.Put(micro_batch, std::move(c));
  return y;
}

absl::StatusOr<Tensor> BatchNorm2d::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Cache c, caches_.Take(micro_batch, prefix_));
  RETURN_IF_ERROR(CheckGrad(prefix_, dy, c.x.shape()));
  Tensor dx = backend_.Empty(c.x.shape());
  backend_.BatchNorm2dBackward(c.x, dy, weight_.value, c.mean, c.invstd, dx, weight_.grad, bias_.grad);
  return dx;
}

}  // namespace ringmaster::engine::nn
