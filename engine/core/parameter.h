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
};

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
