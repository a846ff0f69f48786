#ifndef RINGMASTER_ENGINE_NN_LAYER_H_
#define RINGMASTER_ENGINE_NN_LAYER_H_

// Block: a layer (or a group of layers) with an explicit forward and backward.
//
// Contract:
//  * Forward(x, training, micro_batch) returns a new output tensor. In
//    training it caches what Backward needs under `micro_batch`, so a
//    pipeline schedule (GPipe, 1F1B) can run several forwards before their
//    backwards; eval forwards cache nothing.
//  * Backward(dy, micro_batch) consumes that cache, returns dL/dx and
//    ACCUMULATES (+=) into its parameters' grad tensors (zero them with
//    Model::ZeroGrad). Returns FailedPrecondition without a cached forward.
//  * Shape errors in user-supplied tensors return InvalidArgument.
//  * Parameters() are the trainable tensors, Buffers() the non-trainable
//    state (BatchNorm running statistics); both named as in the matching
//    torch.nn model's state_dict (docs/models.md).
//  * Not thread-safe; the backend passed at construction must outlive it.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/core/backend.h"
#include "engine/core/parameter.h"

namespace ringmaster::engine::nn {

class Block {
 public:
  virtual ~Block() = default;

  // "Linear", "Conv2d", ... (for logs and docs).
  virtual std::string_view kind() const = 0;
  virtual absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) = 0;
  virtual absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) = 0;
  virtual ParameterList Parameters() { return {}; }
  virtual BufferList Buffers() { return {}; }
  // Keys the random streams (dropout masks) of the following training
  // forwards: masks are a pure function of (layer seed, key, element).
  virtual void SetRngKey(uint64_t key) { (void)key; }

  // Convenience for micro-batch 0.
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training) { return Forward(x, training, 0); }
  absl::StatusOr<Tensor> Backward(const Tensor& dy) { return Backward(dy, 0); }
};

// A layer is a block; the two names are used interchangeably.
using Layer = Block;

// A last block that computes the model's loss itself from its input, so that
// its logits never exist whole (the GPT's fused, chunked classifier). Its
// plain Forward/Backward still give and take logits [..., num_classes()].
class LossHead : public Block {
 public:
  // Classes the targets index (the real vocabulary, not its padding).
  virtual int64_t num_classes() const = 0;
  // The mean softmax cross-entropy (f32 [1]) of the logits of x against
  // `targets` (i32, one per row of x; rows equal to ignore_index do not
  // count), as SoftmaxCrossEntropy computes it from Forward's logits. In
  // training it also accumulates the weight gradients (times grad_scale) and
  // keeps the gradient of x for Backward(dy, micro_batch), which then ignores
  // dy (pass an undefined tensor).
  virtual absl::StatusOr<Tensor> ForwardLoss(const Tensor& x, const Tensor& targets, int32_t ignore_index,
                                             float grad_scale, bool training, int micro_batch) = 0;
};

// Per-micro-batch forward caches of one layer.
template <typename Cache>
class CacheSlots {
 public:
  void Put(int micro_batch, Cache cache) { slots_[micro_batch] = std::move(cache); }
  // Removes and returns the cache of `micro_batch`.
  absl::StatusOr<Cache> Take(int micro_batch, absl::string_view layer) {
    auto it = slots_.find(micro_batch);
    if (it == slots_.end())
      return absl::FailedPreconditionError(
          absl::StrCat(layer, ": Backward without a training Forward for micro-batch ", micro_batch));
    Cache c = std::move(it->second);
    slots_.erase(it);
    return c;
  }
  bool Has(int micro_batch) const { return slots_.count(micro_batch) > 0; }
  void Clear() { slots_.clear(); }

 private:
  std::unordered_map<int, Cache> slots_;
};

// A parameter with a zero gradient of the same shape on the backend's device.
// `operand`: the parameter is a GEMM or convolution operand, so it gets an
// operand copy (Parameter::operand_copy) when the backend stores activations
// in 16 bits.
inline Parameter MakeParameter(Backend& backend, std::string name, const Shape& shape, bool decay,
                               bool operand = false) {
  Parameter p;
  p.name = std::move(name);
  p.value = backend.Zeros(shape);
  p.grad = backend.Zeros(shape);
  p.decay = decay;
  if (operand && backend.activation_dtype() != DType::kF32) p.operand_copy = backend.Empty(shape, backend.activation_dtype());
  return p;
}

// x (a model input: images from the loader are f32) stored as the backend
// stores activations: in activation_dtype(), with values of the compute
// dtype. x itself when it is that already, or integer data (tokens); else a
// converted copy (16-bit activations) or a copy rounded to the compute dtype
// (the CPU's f32 activations with a 16-bit compute dtype).
Tensor AsActivation(Backend& backend, const Tensor& x);

// Converts every parameter's value into its operand copy (where it has one):
// after the values change (initialisation, a broadcast, a checkpoint, every
// optimizer step) and before the next forward.
void RefreshOperands(Backend& backend, const ParameterList& params);

// InvalidArgument unless x has rank `rank` (or any rank if rank < 0) and
// dimension `dim` of size `size` (dim < 0 counts from the end).
absl::Status CheckInput(absl::string_view layer, const Tensor& x, int rank, int dim, int64_t size);

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_LAYER_H_
