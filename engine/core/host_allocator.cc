#include "engine/core/host_allocator.h"

#include <cstdlib>

#include "engine/core/check.h"

namespace ringmaster::engine {

HostAllocator::~HostAllocator() {
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) std::free(p);
}

void* HostAllocator::Allocate(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= bytes;
      return p;
    }
  }
  void* p = std::aligned_alloc(64, bytes);
  ENGINE_CHECK(p != nullptr, "out of host memory allocating {} bytes", bytes);
  return p;
}

void HostAllocator::Release(void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cached_bytes_ + bytes > max_cached_bytes_) {
    std::free(p);
    return;
  }
  free_[bytes].push_back(p);
  cached_bytes_ += bytes;
}

Tensor HostAllocator::Empty(const Shape& shape, DType dtype) {
  const size_t bytes = NumElements(shape) * DTypeSize(dtype);
  const size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  void* p = Allocate(rounded);
  CountHostTensorBytes(static_cast<int64_t>(rounded));
  std::shared_ptr<HostAllocator> self = shared_from_this();
  auto storage = std::make_shared<Storage>(p, rounded, Device::kCpu, [self, rounded](void* q) {
    self->Release(q, rounded);
    CountHostTensorBytes(-static_cast<int64_t>(rounded));
  });
  return Tensor(std::move(storage), shape, dtype);
}

}  // namespace ringmaster::engine
