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
//
// Ghost batch norm (BatchNorm2d's ghost_batch = g > 0): in training the batch
// of N samples is cut into K = ceil(N / g) chunks of g consecutive samples (the
// last one holds the rest, N - (K - 1) g), and each chunk is normalised with
// its own mean and biased variance; Backward differentiates each chunk through
// its own statistics (dgamma, dbeta += the chunks' sums, in chunk order). This
// is what a data-parallel run computes when each rank's (micro-)batch is g
// samples, so one process can reproduce a D-rank run with m micro-batches by
// setting g = B / (D m). g = 0, or g >= N, is one chunk: exactly the plain
// batch norm above, bitwise. With K > 1 chunks the running statistics move
// once per Forward, from the mean over chunks of the chunk statistics:
//   running_mean = (1 - momentum) * running_mean + (momentum / K) * S_mean
//   running_var  = (1 - momentum) * running_var  + (momentum / K) * S_var
// where S_mean (S_var) is the fp32 sum, in chunk order, of the chunks' means
// (unbiased variances, n_k / (n_k - 1) with n_k = chunk samples * H * W); the
// update is a Scale by (1 - momentum) then an Axpy with momentum / K.
// num_batches_tracked grows by 1 per Forward, whatever K is.

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
  // ghost_batch: samples per normalisation chunk in training; <= 0: the whole
  // batch (BuildModel rejects negative values in a config).
  BatchNorm2d(Backend& backend, std::string prefix, int64_t channels, float momentum = 0.1f, float eps = 1e-5f,
              int64_t ghost_batch = 0);

  std::string_view kind() const override { return "BatchNorm2d"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override { return {&weight_, &bias_}; }
  BufferList Buffers() override { return {&running_mean_, &running_var_, &num_batches_tracked_}; }
  int64_t ghost_batch() const { return ghost_batch_; }

 private:
  // mean and invstd hold [K * C]: chunk k's statistics at [k * C, (k + 1) * C).
  struct Cache {
    Tensor x, mean, invstd;
    int64_t chunk = 0;  // samples per chunk (the last chunk may hold fewer)
  };
  // Samples per chunk for a batch of n samples.
  int64_t ChunkSize(int64_t n) const { return ghost_batch_ > 0 && ghost_batch_ < n ? ghost_batch_ : n; }
  // running = (1 - momentum) running + (momentum / K) sum of the K chunk stats in `stats` [K * C].
  void UpdateRunning(const Tensor& stats, int64_t chunks, const Tensor& running);

  Backend& backend_;
  std::string prefix_;
  int64_t channels_;
  float momentum_, eps_;
  int64_t ghost_batch_;
  Parameter weight_, bias_;
  Buffer running_mean_, running_var_, num_batches_tracked_;
  CacheSlots<Cache> caches_;
};

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_CONV_H_
