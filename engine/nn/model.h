#ifndef RINGMASTER_ENGINE_NN_MODEL_H_
#define RINGMASTER_ENGINE_NN_MODEL_H_

// Model: an ordered sequence of blocks, the unit pipeline stages cut. Block i
// is what the matching torch.nn model calls "layers.i" (MLP, CNN) or the
// i-th of embedding / transformer blocks / head (GPT); docs/models.md lists
// every architecture and its state_dict names.
//
// Forward/Backward run a [begin, end) range of blocks (end = -1: to the last),
// so a pipeline stage drives its own range and the whole model is [0, n).
// Not thread-safe.

#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layer.h"

namespace ringmaster::engine::nn {

class Model {
 public:
  Model(Backend& backend, std::string name) : backend_(backend), name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  Backend& backend() { return backend_; }
  void Add(std::unique_ptr<Block> block) { blocks_.push_back(std::move(block)); }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  Block& block(int i) { return *blocks_[i]; }

  // Runs blocks begin .. end-1 on x. InvalidArgument for a bad range or input.
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int begin = 0, int end = -1, int micro_batch = 0);
  // Runs the backward of blocks end-1 .. begin; returns dL/d(input of block begin).
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int begin = 0, int end = -1, int micro_batch = 0);

  // Parameters / buffers of blocks [begin, end), in block order, each listed
  // once even when shared (tied embeddings).
  ParameterList Parameters(int begin = 0, int end = -1);
  BufferList Buffers(int begin = 0, int end = -1);
  // Sets every parameter gradient in [begin, end) to zero.
  void ZeroGrad(int begin = 0, int end = -1);
  // Keys the dropout masks of the following training forwards (see Dropout).
  void SetRngKey(uint64_t key);
  // Trainable elements, without padding rows (Parameter::real_rows): what
  // PyTorch counts for the same model.
  int64_t NumParameters();

 private:
  absl::Status ResolveRange(int* begin, int* end) const;

  Backend& backend_;
  std::string name_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_MODEL_H_
