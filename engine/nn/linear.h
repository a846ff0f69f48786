#ifndef RINGMASTER_ENGINE_NN_LINEAR_H_
#define RINGMASTER_ENGINE_NN_LINEAR_H_

// Linear: y[..., out] = x[..., in] @ weight^T + bias, as torch.nn.Linear.
// Parameters "<prefix>.weight" [out, in] and "<prefix>.bias" [out].

#include <string>

#include "engine/nn/layer.h"

namespace ringmaster::engine::nn {

class Linear final : public Block {
 public:
  // Weight and bias U(-1/sqrt(in), 1/sqrt(in)) from `seed` (PyTorch's default).
  Linear(Backend& backend, std::string prefix, int64_t in_features, int64_t out_features, bool bias, uint64_t seed);

  std::string_view kind() const override { return "Linear"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override;
  // gelu(Forward(x)) in one Backend::LinearGeluForward (GPT-2's c_fc + GELU;
  // needs a bias). The pre-activation is kept for BackwardGelu; a micro-batch
  // goes through Forward/Backward or ForwardGelu/BackwardGelu, not a mix.
  absl::StatusOr<Tensor> ForwardGelu(const Tensor& x, bool training, int micro_batch);
  absl::StatusOr<Tensor> BackwardGelu(const Tensor& dy, int micro_batch);

  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }  // undefined value when built without bias

 private:
  Backend& backend_;
  std::string prefix_;
  int64_t in_, out_;
  bool has_bias_;
  Parameter weight_, bias_;
  CacheSlots<Tensor> inputs_;
  CacheSlots<Tensor> pre_gelu_;  // ForwardGelu's x W^T + b
};

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_LINEAR_H_
