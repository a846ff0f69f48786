#ifndef RINGMASTER_ENGINE_CORE_TENSOR_H_
#define RINGMASTER_ENGINE_CORE_TENSOR_H_

// A dense, contiguous, row-major tensor that knows its dtype and device.
// Storage is shared between copies of a Tensor (a Tensor is a handle, like a
// shared_ptr); View() reshapes without copying. Device memory is owned by the
// Allocator that made it (CPU: aligned host memory; CUDA: the caching device
// allocator of the CUDA backend). Not thread-safe: one owner mutates at a time.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace ringmaster::engine {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);  // "[2, 3, 4]"

// Raw bytes on one device. Frees itself through its deleter.
class Storage {
 public:
  Storage(void* data, size_t bytes, Device device, std::function<void(void*)> deleter)
      : data_(data), bytes_(bytes), device_(device), deleter_(std::move(deleter)) {}
  ~Storage() {
    if (deleter_) deleter_(data_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  std::function<void(void*)> deleter_;
};

class Tensor {
 public:
  Tensor() = default;

  // Uninitialised / zeroed host tensors (64-byte aligned).
  static Tensor Empty(const Shape& shape, DType dtype = DType::kF32);
  static Tensor Zeros(const Shape& shape, DType dtype = DType::kF32);
  // A host f32 tensor holding `values` (size must equal NumElements(shape)).
  static Tensor FromVector(const Shape& shape, const std::vector<float>& values);
  // A host i32 tensor holding `values` (token ids, labels).
  static Tensor FromInts(const Shape& shape, const std::vector<int32_t>& values);
  // Wraps memory owned elsewhere (its lifetime must cover the tensor's).
  static Tensor Wrap(void* data, const Shape& shape, DType dtype, Device device);
  // A tensor over `storage` (made by a backend's allocator).
  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, size_t byte_offset = 0);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return NumElements(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::kCpu; }
  size_t bytes() const { return numel() * DTypeSize(dtype_); }

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_; }
  // Typed access; CHECKs the dtype (a wrong dtype is a bug, not bad input).
  float* f32() const;
  uint16_t* u16() const;  // f16 or bf16 bits
  int32_t* i32() const;   // kI32 only

  // Same storage, another shape with the same element count.
  Tensor View(const Shape& shape) const;
  // Elements [begin, begin + count) of the flattened tensor, as a 1-D view.
  Tensor Slice1D(int64_t begin, int64_t count) const;
  // Rows [begin, end) along dimension 0, as a view.
  Tensor Rows(int64_t begin, int64_t end) const;

  // Host copy as float (any dtype, CPU only; CUDA tensors go through the backend).
  std::vector<float> ToVector() const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::kF32;
  size_t offset_ = 0;
};

// Host tensor memory of this process: the bytes held by live host tensors
// (Tensor::Empty and friends, and the CPU backend's allocator, not counting
// the freed blocks it caches) and their peak: the CPU's counterpart of the
// CUDA caching allocator's allocated bytes. Thread-safe.
struct HostTensorMemory {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
};
HostTensorMemory HostTensorMemoryStats();
// Starts a new peak from the bytes live now.
void ResetHostTensorPeak();
// For allocators of host tensors: bytes handed out (> 0) or given back (< 0).
void CountHostTensorBytes(int64_t delta);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_TENSOR_H_
