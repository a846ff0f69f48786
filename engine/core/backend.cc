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

}  // namespace ringmaster::engine
