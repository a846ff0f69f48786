#ifndef RINGMASTER_ENGINE_NN_CONV_H_
#define RINGMASTER_ENGINE_NN_CONV_H_

// Convolutional layers on NCHW tensors, matching torch.nn:
//   Conv2d: "<prefix>.weight" [out, in, kh, kw] (+ "<prefix>.bias" [out]).
//   MaxPool2d(kernel, stride): no parameters.
//   BatchNorm2d: "<prefix>.weight", "<prefix>.bias" [C] (parameters);
//     "<prefix>.running_mean", "<prefix>.running_var" [C] and
//     "<prefix>.num_batches_tracked" (shape [], stored as f32) (buffers).
//     Training normalises with this batch's statistics (per rank: "ghost"
//     batch norm under data parallelism) and updates the running statistics
//     (PyTorch's momentum 0.1, unbiased variance); eval uses the running ones.

#include <string>

#include "engine/nn/layer.h"

namespace ringmaster::engine::nn {

class Conv2d final : public Block {
 public:
  // Square kernel, stride and padding. Weight and bias U(-1/sqrt(fan_in), ..)
  // with fan_in = in * k * k (PyTorch's default).
  Conv2d(Backend& backend, std::string prefix, int64_t in_channels, int64_t out_channels, int64_t kernel,
         int64_t stride, int64_t padding, bool bias, uint64_t seed);

  std::string_view kind() const override { return "Conv2d"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override;

 private:
  Backend& backend_;
  std::string prefix_;
  int64_t in_, out_;
  Conv2dGeometry geometry_;
  bool has_bias_;
  Parameter weight_, bias_;
  CacheSlots<Tensor> inputs_;
};

class MaxPool2d final : public Block {
 public:
  MaxPool2d(Backend& backend, std::string name, int64_t kernel, int64_t stride)
      : backend_(backend), name_(std::move(name)), kernel_(kernel), stride_(stride) {}
  std::string_view kind() const override { return "MaxPool2d"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;

 private:
  Backend& backend_;
  std::string name_;
  int64_t kernel_, stride_;
  CacheSlots<Tensor> inputs_;
};

class BatchNorm2d final : public Block {
 public:
  BatchNorm2d(Backend& backend, std::string prefix, int64_t channels, float momentum = 0.1f, float eps = 1e-5f);

  std::string_view kind() const override { return "BatchNorm2d"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override { return {&weight_, &bias_}; }
  BufferList Buffers() override { return {&running_mean_, &running_var_, &num_batches_tracked_}; }

 private:
  struct Cache {
    Tensor x, mean, invstd;
  };
  Backend& backend_;
  std::string prefix_;
  int64_t channels_;
  float momentum_, eps_;
  Parameter weight_, bias_;
  Buffer running_mean_, running_var_, num_batches_tracked_;
  CacheSlots<Cache> caches_;
};

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_CONV_H_
