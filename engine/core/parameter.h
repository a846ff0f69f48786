#ifndef RINGMASTER_ENGINE_CORE_PARAMETER_H_
#define RINGMASTER_ENGINE_CORE_PARAMETER_H_

#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace ringmaster::engine {

// A trainable parameter: fp32 master value and its gradient (same shape,
// same device). `name` is the PyTorch state_dict name of the same layer
// ("layers.0.weight"), used for checkpoints and optimizer state.
struct Parameter {
  std::string name;
  Tensor value;
  Tensor grad;
  // Weight decay (and LARS/LAMB trust ratio) applies; false for biases and norms.
  bool decay = true;
  // For a GEMM or convolution operand on a backend that stores activations in
  // 16 bits: `value` converted to that dtype, made once per optimizer step
  // (engine/nn/layer.h's RefreshOperands), which the ops read instead of
  // converting the f32 master on every call. Undefined otherwise.
  Tensor operand_copy;
  // >= 0: only the first `real_rows` rows of value are the model's; the rest
  // pads it (the GPT's vocabulary, padded to a multiple of 128). Padding rows
  // start at zero and stay zero (no op gives them a gradient); checkpoints
  // hold the real rows alone, under PyTorch's shape.
  int64_t real_rows = -1;

  // What a GEMM or convolution reads: the 16-bit copy, or the value itself.
  const Tensor& operand() const { return operand_copy.defined() ? operand_copy : value; }
};

// The model's rows of `t` (p's value, gradient or a state tensor of its
// shape): all of it, or the first p.real_rows rows of a padded parameter.
inline Tensor RealRows(const Parameter& p, const Tensor& t) {
  return p.real_rows >= 0 ? t.Rows(0, p.real_rows) : t;
}

// Non-owning list of a model's (or a pipeline stage's) parameters, in layer order.
using ParameterList = std::vector<Parameter*>;

// A non-trainable tensor that is part of the model's state (BatchNorm running
// statistics): saved in checkpoints under its PyTorch state_dict name, never
// touched by optimizers and never all-reduced.
struct Buffer {
  std::string name;
  Tensor value;
};

using BufferList = std::vector<Buffer*>;

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_PARAMETER_H_
