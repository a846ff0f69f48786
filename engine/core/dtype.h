#ifndef RINGMASTER_ENGINE_CORE_DTYPE_H_
#define RINGMASTER_ENGINE_CORE_DTYPE_H_

// Element types and devices, and the fp16/bf16 conversions the CPU backend
// uses to store and to round ("compute in fp16/bf16" on the CPU means every op's
// inputs and outputs are rounded to the format; accumulation stays fp32).

#include <cstdint>
#include <cstring>
#include <string>

namespace ringmaster::engine {

// kI32 holds integer data (token ids, class labels); it is never a compute dtype.
enum class DType : uint8_t { kF32, kF16, kBF16, kI32 };
enum class Device : uint8_t { kCpu, kCuda };

inline size_t DTypeSize(DType t) { return t == DType::kF32 || t == DType::kI32 ? 4 : 2; }
const char* DTypeName(DType t);    // "f32", "f16", "bf16", "i32"
const char* DeviceName(Device d);  // "cpu", "cuda"

// Round-to-nearest-even conversions; NaN stays NaN, overflow becomes inf.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);
inline float BFloat16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// f rounded to `t` and back (identity for kF32 and kI32).
float RoundTo(DType t, float f);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_DTYPE_H_
