#include "engine/nn/sequential.h"

#include "common/status_macros.h"

namespace ringmaster::engine::nn {

absl::StatusOr<Tensor> Sequential::Forward(const Tensor& x, bool training, int micro_batch) {
  Tensor h = x;
  for (auto& layer : layers_) {
    ASSIGN_OR_RETURN(h, layer->Forward(h, training, micro_batch));
  }
  return h;
}

absl::StatusOr<Tensor> Sequential::Backward(const Tensor& dy, int micro_batch) {
  Tensor d = dy;
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    ASSIGN_OR_RETURN(d, (*it)->Backward(d, micro_batch));
  }
  return d;
}

ParameterList Sequential::Parameters() {
  ParameterList out;
  for (auto& layer : layers_) {
    ParameterList p = layer->Parameters();
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

BufferList Sequential::Buffers() {
  BufferList out;
  for (auto& layer : layers_) {
    BufferList b = layer->Buffers();
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

void Sequential::SetRngKey(uint64_t key) {
  for (auto& layer : layers_) layer->SetRngKey(key);
}

}  // namespace ringmaster::engine::nn
