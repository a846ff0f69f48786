#ifndef RINGMASTER_ENGINE_DIST_NCCL_DEVICE_TENSOR_H_
#define RINGMASTER_ENGINE_DIST_NCCL_DEVICE_TENSOR_H_

// testing::DeviceTensor: a CUDA tensor for the NCCL tests, in device memory
// it owns, filled from and read back as floats (f32, f16, bf16, i32).
// Allocated on the calling thread's current device. Not thread-safe.
//
// Copies are enqueued on a stream (the legacy default stream unless given)
// and waited for: after FromFloats the values are on the device for work on
// any stream (the process group's non-blocking streams included); ToFloats
// reads after the work enqueued on its stream, so a test waits for the
// collective first (Work::Wait, or WaitOnStream then that stream).

#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/core/cuda_status.h"
#include "engine/core/dtype.h"
#include "engine/core/tensor.h"

namespace ringmaster::engine::dist::testing {

class DeviceTensor {
 public:
  static absl::StatusOr<DeviceTensor> FromFloats(const Shape& shape, const std::vector<float>& values,
                                                 DType dtype = DType::kF32, cudaStream_t stream = nullptr) {
    DeviceTensor t;
    absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Allocate(NumElements(shape) * DTypeSize(dtype));
    if (!buffer.ok()) return buffer.status();
    t.buffer_ = std::move(buffer).value();
    t.tensor_ = Tensor::Wrap(t.buffer_.data(), shape, dtype, Device::kCuda);
    std::vector<char> host(t.tensor_.bytes());
    for (size_t i = 0; i < values.size(); ++i) {
      switch (dtype) {
        case DType::kF32: std::memcpy(&host[4 * i], &values[i], 4); break;
        case DType::kI32: {
          int32_t v = static_cast<int32_t>(values[i]);
          std::memcpy(&host[4 * i], &v, 4);
          break;
        }
        case DType::kF16: {
          uint16_t h = FloatToHalf(values[i]);
          std::memcpy(&host[2 * i], &h, 2);
          break;
        }
        case DType::kBF16: {
          uint16_t b = FloatToBFloat16(values[i]);
          std::memcpy(&host[2 * i], &b, 2);
          break;
        }
      }
    }
    absl::Status copied = t.buffer_.CopyFromHost(host.data(), host.size(), stream);
    if (!copied.ok()) return copied;
    return t;
  }

  static absl::StatusOr<DeviceTensor> Zeros(const Shape& shape, DType dtype = DType::kF32,
                                            cudaStream_t stream = nullptr) {
    return FromFloats(shape, std::vector<float>(NumElements(shape), 0.0f), dtype, stream);
  }

  const Tensor& tensor() const { return tensor_; }

  // The values, as floats: copied after the work enqueued on `stream`, and
  // waited for.
  absl::StatusOr<std::vector<float>> ToFloats(cudaStream_t stream = nullptr) const {
    std::vector<char> host(tensor_.bytes());
    absl::Status copied = buffer_.CopyToHost(host.data(), host.size(), stream);
    if (!copied.ok()) return copied;
    std::vector<float> values(tensor_.numel());
    for (size_t i = 0; i < values.size(); ++i) {
      switch (tensor_.dtype()) {
        case DType::kF32: std::memcpy(&values[i], &host[4 * i], 4); break;
        case DType::kI32: {
          int32_t v;
          std::memcpy(&v, &host[4 * i], 4);
          values[i] = static_cast<float>(v);
          break;
        }
        case DType::kF16: {
          uint16_t h;
          std::memcpy(&h, &host[2 * i], 2);
          values[i] = HalfToFloat(h);
          break;
        }
        case DType::kBF16: {
          uint16_t b;
          std::memcpy(&b, &host[2 * i], 2);
          values[i] = BFloat16ToFloat(b);
          break;
        }
      }
    }
    return values;
  }

 private:
  DeviceBuffer buffer_;
  Tensor tensor_;
};

}  // namespace ringmaster::engine::dist::testing

#endif  // RINGMASTER_ENGINE_DIST_NCCL_DEVICE_TENSOR_H_
