#ifndef RINGMASTER_ENGINE_NN_ACTIVATION_H_
#define RINGMASTER_ENGINE_NN_ACTIVATION_H_

// Parameter-free layers: ReLU, GELU (tanh approximation, as GPT-2), Dropout
// and Flatten. Each matches the torch.nn module of the same name.

#include <string>

#include "engine/nn/layer.h"

namespace ringmaster::engine::nn {

class Relu final : public Block {
 public:
  Relu(Backend& backend, std::string name) : backend_(backend), name_(std::move(name)) {}
  std::string_view kind() const override { return "ReLU"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;

 private:
  Backend& backend_;
  std::string name_;
  CacheSlots<Tensor> outputs_;
};

// torch.nn.GELU(approximate="tanh").
class Gelu final : public Block {
 public:
  Gelu(Backend& backend, std::string name) : backend_(backend), name_(std::move(name)) {}
  std::string_view kind() const override { return "GELU"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;

 private:
  Backend& backend_;
  std::string name_;
  CacheSlots<Tensor> inputs_;
};

// Inverted dropout with probability p in training, identity in eval. The mask
// of a training forward is a pure function of (seed, rng key, forward count
// since the key was set, element index): set the key per step with
// SetRngKey (e.g. from the global step and the data-parallel rank) and the
// masks are reproducible across restarts and thread counts.
class Dropout final : public Block {
 public:
  Dropout(Backend& backend, std::string name, float p, uint64_t seed);
  std::string_view kind() const override { return "Dropout"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;
  void SetRngKey(uint64_t key) override {
    key_ = key;
    calls_ = 0;
  }

 private:
  Backend& backend_;
  std::string name_;
  float p_;
  uint64_t seed_;
  uint64_t key_ = 0;
  uint64_t calls_ = 0;
  CacheSlots<Tensor> masks_;  // empty tensor when p == 0
};

// [N, d1, d2, ...] -> [N, d1 * d2 * ...] (a view; torch.nn.Flatten()).
class Flatten final : public Block {
 public:
  explicit Flatten(std::string name) : name_(std::move(name)) {}
  std::string_view kind() const override { return "Flatten"; }
  using Block::Backward;
  using Block::Forward;
  absl::StatusOr<Tensor> Forward(const Tensor& x, bool training, int micro_batch) override;
  absl::StatusOr<Tensor> Backward(const Tensor& dy, int micro_batch) override;

 private:
  std::string name_;
  CacheSlots<Shape> shapes_;
};

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_ACTIVATION_H_
