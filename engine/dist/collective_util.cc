#include "engine/dist/collective_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/core/check.h"

namespace ringmaster::engine::dist {

absl::Status CheckHostPlacement(const Tensor& tensor, absl::string_view what) {
  if (tensor.device() == Device::kCpu) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " tensor is on ", DeviceName(tensor.device()),
                                                 "; this group serves host tensors"));
}

void CopyToF32(const Tensor& tensor, float* out) {
  const int64_t n = tensor.numel();
  switch (tensor.dtype()) {
    case DType::kF32: {
      const float* in = tensor.f32();
      std::copy(in, in + n, out);
      return;
    }
    case DType::kF16: {
      const uint16_t* in = tensor.u16();
      for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
      return;
    }
    case DType::kBF16: {
      const uint16_t* in = tensor.u16();
      for (int64_t i = 0; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
      return;
    }
    case DType::kI32:
      break;
  }
  ENGINE_CHECK(false, "CopyToF32 of a non-reducible dtype {}", DTypeName(tensor.dtype()));
}

void CopyFromF32(const float* values, const Tensor& tensor) {
  const int64_t n = tensor.numel();
  switch (tensor.dtype()) {
    case DType::kF32: {
      float* out = tensor.f32();
      if (out != values) std::copy(values, values + n, out);
      return;
    }
    case DType::kF16: {
      uint16_t* out = tensor.u16();
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(values[i]);
      return;
    }
    case DType::kBF16: {
      uint16_t* out = tensor.u16();
      for (int64_t i = 0; i < n; ++i) out[i] = FloatToBFloat16(values[i]);
      return;
    }
    case DType::kI32:
      break;
  }
  ENGINE_CHECK(false, "CopyFromF32 into a non-reducible dtype {}", DTypeName(tensor.dtype()));
}

void AddF32(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void DivideF32(float* values, size_t n, float divisor) {
  for (size_t i = 0; i < n; ++i) values[i] /= divisor;
}

const char* ReduceOpName(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "avg"; }

}  // namespace ringmaster::engine::dist
