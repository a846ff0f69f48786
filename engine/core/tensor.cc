#include "engine/core/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_join.h"
#include "engine/core/check.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

std::atomic<int64_t> host_live_bytes{0};
std::atomic<int64_t> host_peak_bytes{0};

std::shared_ptr<Storage> HostStorage(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  ENGINE_CHECK(p != nullptr, "out of host memory allocating {} bytes", bytes);
  const auto counted = static_cast<int64_t>(rounded);
  CountHostTensorBytes(counted);
  return std::make_shared<Storage>(p, bytes, Device::kCpu, [counted](void* q) {
    std::free(q);
    CountHostTensorBytes(-counted);
  });
}

}  // namespace

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) { return "[" + absl::StrJoin(shape, ", ") + "]"; }

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, size_t byte_offset)
    : storage_(std::move(storage)), shape_(std::move(shape)), dtype_(dtype), offset_(byte_offset) {
  ENGINE_CHECK(offset_ + bytes() <= storage_->bytes(), "tensor {} at offset {} exceeds its storage of {} bytes",
               ShapeString(shape_), offset_, storage_->bytes());
}

Tensor Tensor::Empty(const Shape& shape, DType dtype) {
  return Tensor(HostStorage(NumElements(shape) * DTypeSize(dtype)), shape, dtype);
}

Tensor Tensor::Zeros(const Shape& shape, DType dtype) {
  Tensor t = Empty(shape, dtype);
  std::memset(t.raw(), 0, t.bytes());
  return t;
}

Tensor Tensor::FromVector(const Shape& shape, const std::vector<float>& values) {
  ENGINE_CHECK(static_cast<int64_t>(values.size()) == NumElements(shape), "{} values for shape {}",
               values.size(), ShapeString(shape));
  Tensor t = Empty(shape, DType::kF32);
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::FromInts(const Shape& shape, const std::vector<int32_t>& values) {
  ENGINE_CHECK(static_cast<int64_t>(values.size()) == NumElements(shape), "{} values for shape {}",
               values.size(), ShapeString(shape));
  Tensor t = Empty(shape, DType::kI32);
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

Tensor Tensor::Wrap(void* data, const Shape& shape, DType dtype, Device device) {
  auto storage = std::make_shared<Storage>(data, NumElements(shape) * DTypeSize(dtype), device, nullptr);
  return Tensor(std::move(storage), shape, dtype);
}

float* Tensor::f32() const {
  ENGINE_CHECK(dtype_ == DType::kF32, "f32() on a {} tensor", DTypeName(dtype_));
  return static_cast<float*>(raw());
}

uint16_t* Tensor::u16() const {
  ENGINE_CHECK(dtype_ == DType::kF16 || dtype_ == DType::kBF16, "u16() on a {} tensor", DTypeName(dtype_));
  return static_cast<uint16_t*>(raw());
}

int32_t* Tensor::i32() const {
  ENGINE_CHECK(dtype_ == DType::kI32, "i32() on a {} tensor", DTypeName(dtype_));
  return static_cast<int32_t*>(raw());
}

Tensor Tensor::View(const Shape& shape) const {
  ENGINE_CHECK(NumElements(shape) == numel(), "view {} of {}", ShapeString(shape), ShapeString(shape_));
  return Tensor(storage_, shape, dtype_, offset_);
}

Tensor Tensor::Slice1D(int64_t begin, int64_t count) const {
  ENGINE_CHECK(begin >= 0 && count >= 0 && begin + count <= numel(), "slice [{}, +{}) of {}", begin, count,
               ShapeString(shape_));
  return Tensor(storage_, {count}, dtype_, offset_ + begin * DTypeSize(dtype_));
}

Tensor Tensor::Rows(int64_t begin, int64_t end) const {
  ENGINE_CHECK(rank() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "rows [{}, {}) of {}", begin, end,
               ShapeString(shape_));
  Shape s = shape_;
  s[0] = end - begin;
  int64_t row = NumElements(shape_) / std::max<int64_t>(shape_[0], 1);
  return Tensor(storage_, s, dtype_, offset_ + begin * row * DTypeSize(dtype_));
}

std::vector<float> Tensor::ToVector() const {
  ENGINE_CHECK(device() == Device::kCpu, "ToVector on a {} tensor", DeviceName(device()));
  std::vector<float> out(numel());
  switch (dtype_) {
    case DType::kF32:
      std::memcpy(out.data(), raw(), bytes());
      break;
    case DType::kF16:
      for (int64_t i = 0; i < numel(); ++i) out[i] = HalfToFloat(u16()[i]);
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < numel(); ++i) out[i] = BFloat16ToFloat(u16()[i]);
      break;
    case DType::kI32:
      for (int64_t i = 0; i < numel(); ++i) out[i] = static_cast<float>(i32()[i]);
      break;
  }
  return out;
}

void CountHostTensorBytes(int64_t delta) {
  const int64_t live = host_live_bytes.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = host_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !host_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

HostTensorMemory HostTensorMemoryStats() {
  return {host_live_bytes.load(std::memory_order_relaxed), host_peak_bytes.load(std::memory_order_relaxed)};
}

void ResetHostTensorPeak() { host_peak_bytes.store(host_live_bytes.load(std::memory_order_relaxed)); }

}  // namespace ringmaster::engine
