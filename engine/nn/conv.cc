#include "engine/nn/conv.h"

#include <algorithm>

#include "common/status_macros.h"
#include "engine/nn/init.h"

namespace ringmaster::engine::nn {
namespace {

absl::Status CheckGrad(absl::string_view name, const Tensor& dy, const Shape& want) {
  if (dy.shape() != want || dy.dtype() == DType::kI32)
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
  weight_ = MakeParameter(backend, prefix_ + ".weight", {out_, in_, kernel, kernel}, true, /*operand=*/true);
  InitUniformFanIn(backend, weight_, in_ * kernel * kernel, seed);
  if (has_bias_) {
    bias_ = MakeParameter(backend, prefix_ + ".bias", {out_}, false, /*operand=*/true);
    InitUniformFanIn(backend, bias_, in_ * kernel * kernel, seed);
  }
}

absl::StatusOr<Tensor> Conv2d::Forward(const Tensor& x, bool training, int micro_batch) {
  RETURN_IF_ERROR(CheckInput(prefix_, x, 4, 1, in_));
  const int64_t oh = Conv2dGeometry::OutSize(x.dim(2), geometry_.kernel_h, geometry_.stride_h, geometry_.pad_h);
  const int64_t ow = Conv2dGeometry::OutSize(x.dim(3), geometry_.kernel_w, geometry_.stride_w, geometry_.pad_w);
  if (oh <= 0 || ow <= 0)
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": input ", ShapeString(x.shape()), " smaller than the kernel"));
  Tensor y = backend_.EmptyActivation({x.dim(0), out_, oh, ow});
  backend_.Conv2dForward(x, weight_.operand(), has_bias_ ? &bias_.operand() : nullptr, geometry_, y);
  if (training) inputs_.Put(micro_batch, x);
  return y;
}

absl::StatusOr<Tensor> Conv2d::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor x, inputs_.Take(micro_batch, prefix_));
  const int64_t oh = Conv2dGeometry::OutSize(x.dim(2), geometry_.kernel_h, geometry_.stride_h, geometry_.pad_h);
  const int64_t ow = Conv2dGeometry::OutSize(x.dim(3), geometry_.kernel_w, geometry_.stride_w, geometry_.pad_w);
  RETURN_IF_ERROR(CheckGrad(prefix_, dy, {x.dim(0), out_, oh, ow}));
  Tensor dx = backend_.EmptyActivation(x.shape());
  backend_.Conv2dBackward(x, weight_.operand(), dy, geometry_, &dx, weight_.grad, has_bias_ ? &bias_.grad : nullptr);
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
  Tensor y = backend_.EmptyActivation(
      {x.dim(0), x.dim(1), (x.dim(2) - kernel_) / stride_ + 1, (x.dim(3) - kernel_) / stride_ + 1});
  backend_.MaxPool2dForward(x, kernel_, stride_, y);
  if (training) inputs_.Put(micro_batch, x);
  return y;
}

absl::StatusOr<Tensor> MaxPool2d::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Tensor x, inputs_.Take(micro_batch, name_));
  RETURN_IF_ERROR(CheckGrad(name_, dy,
                            {x.dim(0), x.dim(1), (x.dim(2) - kernel_) / stride_ + 1, (x.dim(3) - kernel_) / stride_ + 1}));
  Tensor dx = backend_.EmptyActivation(x.shape());
  backend_.MaxPool2dBackward(x, dy, kernel_, stride_, dx);
  return dx;
}

BatchNorm2d::BatchNorm2d(Backend& backend, std::string prefix, int64_t channels, float momentum, float eps,
                         int64_t ghost_batch)
    : backend_(backend),
      prefix_(std::move(prefix)),
      channels_(channels),
      momentum_(momentum),
      eps_(eps),
      ghost_batch_(ghost_batch) {
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
  Tensor y = backend_.EmptyActivation(x.shape());
  if (!training) {
    backend_.BatchNorm2dForwardEval(x, weight_.value, bias_.value, running_mean_.value, running_var_.value, eps_, y);
    return y;
  }
  const int64_t n = x.dim(0), plane = x.dim(2) * x.dim(3);
  if (n * plane < 2)
    return absl::InvalidArgumentError(
        absl::StrCat(prefix_, ": training needs more than one value per channel, got ", ShapeString(x.shape())));
  const int64_t chunk = ChunkSize(n);
  const int64_t chunks = (n + chunk - 1) / chunk;
  const int64_t last = n - (chunks - 1) * chunk;
  if (last * plane < 2)
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": ghost batches of ", chunk, " leave a last chunk of ",
                                                   last, " samples with one value per channel, input ",
                                                   ShapeString(x.shape())));
  Cache c{x, backend_.Empty({chunks * channels_}), backend_.Empty({chunks * channels_}), chunk};
  // One chunk updates the running statistics in the kernel, exactly as without
  // ghost batches. Several: each kernel call writes its chunk's statistics
  // (momentum 1 over zeros) and UpdateRunning folds them in afterwards.
  Tensor chunk_means, chunk_vars;
  if (chunks > 1) {
    chunk_means = backend_.Zeros({chunks * channels_});
    chunk_vars = backend_.Zeros({chunks * channels_});
  }
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * chunk, end = std::min(n, begin + chunk);
    const Tensor stats_mean = chunks > 1 ? chunk_means.Slice1D(k * channels_, channels_) : running_mean_.value;
    const Tensor stats_var = chunks > 1 ? chunk_vars.Slice1D(k * channels_, channels_) : running_var_.value;
    backend_.BatchNorm2dForwardTrain(x.Rows(begin, end), weight_.value, bias_.value, chunks > 1 ? 1.0f : momentum_,
                                     eps_, stats_mean, stats_var, y.Rows(begin, end),
                                     c.mean.Slice1D(k * channels_, channels_),
                                     c.invstd.Slice1D(k * channels_, channels_));
  }
  if (chunks > 1) {
    UpdateRunning(chunk_means, chunks, running_mean_.value);
    UpdateRunning(chunk_vars, chunks, running_var_.value);
  }
  // num_batches_tracked += 1 (a device-side add keeps the CUDA path sync-free).
  Tensor one = backend_.Empty({});
  backend_.Fill(one, 1.0f);
  backend_.Axpy(1.0f, one, num_batches_tracked_.value);
  caches_.Put(micro_batch, std::move(c));
  return y;
}

void BatchNorm2d::UpdateRunning(const Tensor& stats, int64_t chunks, const Tensor& running) {
  Tensor sum = backend_.Zeros({channels_});
  for (int64_t k = 0; k < chunks; ++k) backend_.Axpy(1.0f, stats.Slice1D(k * channels_, channels_), sum);
  backend_.Scale(running, 1.0f - momentum_);
  backend_.Axpy(momentum_ / static_cast<float>(chunks), sum, running);
}

absl::StatusOr<Tensor> BatchNorm2d::Backward(const Tensor& dy, int micro_batch) {
  ASSIGN_OR_RETURN(Cache c, caches_.Take(micro_batch, prefix_));
  RETURN_IF_ERROR(CheckGrad(prefix_, dy, c.x.shape()));
  Tensor dx = backend_.EmptyActivation(c.x.shape());
  const int64_t n = c.x.dim(0);
  for (int64_t k = 0, begin = 0; begin < n; ++k, begin += c.chunk) {
    const int64_t end = std::min(n, begin + c.chunk);
    backend_.BatchNorm2dBackward(c.x.Rows(begin, end), dy.Rows(begin, end), weight_.value,
                                 c.mean.Slice1D(k * channels_, channels_),
                                 c.invstd.Slice1D(k * channels_, channels_), dx.Rows(begin, end), weight_.grad,
                                 bias_.grad);
  }
  return dx;
}

}  // namespace ringmaster::engine::nn
