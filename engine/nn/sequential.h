#ifndef RINGMASTER_ENGINE_NN_SEQUENTIAL_H_
#define RINGMASTER_ENGINE_NN_SEQUENTIAL_H_

// Sequential: a block made of layers run in order — one of the model's
// pipeline-cuttable units (a conv stage: Conv2d + BatchNorm2d + ReLU + pool; a
// hidden layer: Linear + ReLU + Dropout). The layers keep their own PyTorch
// names ("layers.4.weight"); grouping them changes no name. Not thread-safe.

#include <memory>
#include <vector>

#include "engine/nn/layer.h"

namespace ringmaster::engine::nn {

class Sequential final : public Block {
 public:
  Sequential() = default;
  void Add(std::unique_ptr<Block> layer) { layers_.push_back(std::move(layer)); }
  int size() const { return static_cast<int>(layers_.size()); }

  std::string_view kind() const override { return "Sequential"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  ParameterList Parameters() override;
  BufferList Buffers() override;
  void SetRngKey(uint64_t key) override;

 private:
  std::vector<std::unique_ptr<Block>> layers_;
};

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_SEQUENTIAL_H_
