#include "engine/core/backend.h"

#include <cstring>

namespace ringmaster::engine {

Tensor Backend::ToDevice(const Tensor& host) {
  Tensor t = Empty(host.shape(), host.dtype());
  CopyFromHost(host, t);
  return t;
}

Tensor Backend::ToHost(const Tensor& src) {
  if (src.device() == Device::kCpu) {
    Tensor t = Tensor::Empty(src.shape(), src.dtype());
    std::memcpy(t.raw(), src.raw(), src.bytes());
    return t;
  }
  Tensor t = Tensor::Empty(src.shape(), src.dtype());
  CopyToHost(src, t);
  return t;
}

void Backend::SoftmaxCrossEntropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                                  float grad_scale, const Tensor& loss, const Tensor& dlogits) {
  Tensor count = Empty({1});
  CountTargets(targets, ignore_index, count);
  Fill(loss, 0.0f);
  SoftmaxCrossEntropyChunk(logits, logits.dim(-1), targets, ignore_index, count, grad_scale, loss, &dlogits);
}

}  // namespace ringmaster::engine
