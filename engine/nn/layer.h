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
  void Clear() { slots_.clear(); }

 private:
  std::unordered_map<int, Cache> slots_;
};

// A parameter with a zero gradient of the same shape on the backend's device.
inline Parameter MakeParameter(Backend& backend, std::string name, const Shape& shape, bool decay) {
  Parameter p;
  p.name = std::move(name);
  p.value = backend.Zeros(shape);
  p.grad = backend.Zeros(shape);
  p.decay = decay;
  return p;
}

// InvalidArgument unless x has rank `rank` (or any rank if rank < 0) and
// dimension `dim` of size `size` (dim < 0 counts from the end).
absl::Status CheckInput(absl::string_view layer, const Tensor& x, int rank, int dim, int64_t size);

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_LAYER_H_
