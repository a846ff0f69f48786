#ifndef RINGMASTER_ENGINE_NN_LOSS_H_
#define RINGMASTER_ENGINE_NN_LOSS_H_

// SoftmaxCrossEntropy: the fused loss of classifiers and language models
// (torch.nn.functional.cross_entropy with reduction="mean" and ignore_index).
// Forward computes the loss and dlogits in one pass; Backward hands dlogits
// out. Not a Block: it takes targets as a second input.

#include <string>

#include "engine/nn/layer.h"
#include "engine/nn/model.h"

namespace ringmaster::engine::nn {

class SoftmaxCrossEntropy {
 public:
  // Rows whose target equals ignore_index do not count (PyTorch's default -100).
  explicit SoftmaxCrossEntropy(Backend& backend, int32_t ignore_index = -100)
      : backend_(backend), ignore_index_(ignore_index) {}

  // logits [..., V] (activation dtype), targets i32 with logits.numel() / V
  // elements, each in [0, V) or ignore_index. Returns the mean loss as an f32
  // [1] tensor on the device; dlogits (scaled by grad_scale, the fp16 loss
  // scale) are cached for Backward when training.
  absl::StatusOr<Tensor> Forward(const Tensor& logits, const Tensor& targets, bool training, float grad_scale = 1.0f,
                                 int micro_batch = 0);
  // Blocks [begin, end) of `model` (end = -1: to the last), then the loss of
  // their output. When the last block of the range is a LossHead (the GPT's
  // classifier) the two run fused and its logits never exist whole;
  // otherwise Forward of the range, then Forward above.
  absl::StatusOr<Tensor> ForwardModel(Model& model, const Tensor& x, const Tensor& targets, bool training,
                                      float grad_scale = 1.0f, int begin = 0, int end = -1, int micro_batch = 0);
  // What starts the backward of the blocks: dL/dlogits (times grad_scale),
  // shaped like the logits; after a fused ForwardModel, an undefined tensor
  // (the LossHead kept its input's gradient itself).
  absl::StatusOr<Tensor> Backward(int micro_batch = 0);

 private:
  // INVALID_ARGUMENT for a host target outside [0, classes) that is not ignore_index.
  absl::Status CheckTargetRange(const Tensor& targets, int64_t classes) const;

  Backend& backend_;
  int32_t ignore_index_;
  CacheSlots<Tensor> dlogits_;  // undefined for a fused micro-batch
};

// Host helper for evaluation: how many rows of logits [M, V] (any float dtype)
// have their argmax equal to the target (first maximum wins).
absl::StatusOr<int64_t> CountCorrect(Backend& backend, const Tensor& logits, const Tensor& targets);

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_LOSS_H_
