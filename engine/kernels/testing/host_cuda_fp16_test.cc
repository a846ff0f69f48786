// fp16/bf16 under the harness are CUDA's own (<cuda_fp16.h>, <cuda_bf16.h>,
// whose host code rounds as the device does); this checks that they agree
// with the CPU backend's conversions (engine/core/dtype.h) bit for bit:
// round to nearest even at ties, subnormals, overflow to infinity, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/kernels/testing/host_cuda.h"

namespace {

using ringmaster::engine::BFloat16ToFloat;
using ringmaster::engine::FloatToBFloat16;
using ringmaster::engine::FloatToHalf;
using ringmaster::engine::HalfToFloat;

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
uint16_t Bits(__half h) { return __half_as_ushort(h); }
uint16_t Bits(__nv_bfloat16 b) { return __bfloat16_as_ushort(b); }
bool HalfIsNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool BFloat16IsNan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

// Float bit patterns to convert: a stride through all of them, and every
// case that needs care for both formats (both signs of each).
std::vector<uint32_t> Inputs() {
  std::vector<uint32_t> in;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) in.push_back(static_cast<uint32_t>(b));
  for (uint32_t exp = 0; exp < 256; ++exp) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7fffu, 0x8000u, 0x8001u,
                         0x18000u, 0x7fffffu, 0x7ff000u, 0x7fe000u, 0x7f8000u, 0x7f0000u}) {
      in.push_back(exp << 23 | low);  // half ties (low 13 bits 0x1000), bf16 ties (low 16 bits 0x8000), ...
    }
  }
  for (float f : {0.0f, 65504.0f, 65519.0f, 65519.99f, 65520.0f, 65536.0f, 6.1035156e-05f, 5.9604645e-08f,
                  2.9802322e-08f, 2.9802326e-08f, 8.9406967e-08f, 3.3895314e+38f, 3.4028235e+38f, INFINITY}) {
    in.push_back(Bits(f));
  }
  in.push_back(0x7fc00000u);  // quiet NaN
  in.push_back(0x7f800001u);  // signalling NaN
  in.push_back(0x7fbfffffu);
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) in.push_back(in[i] ^ 0x80000000u);
  return in;
}

TEST(HostCudaFp16Test, FloatToHalfAgreesWithTheCpuBackend) {
  int64_t compared = 0;
  for (uint32_t b : Inputs()) {
    const float f = FromBits(b);
    const uint16_t device = Bits(__float2half_rn(f)), cpu = FloatToHalf(f);
    if (std::isnan(f)) {  // both NaN; the payloads differ (CUDA: canonical 0x7fff)
      ASSERT_TRUE(HalfIsNan(device) && HalfIsNan(cpu)) << std::hex << b;
    } else {
      ASSERT_EQ(device, cpu) << "float bits 0x" << std::hex << b << " (" << f << ")";
    }
    ++compared;
  }
  EXPECT_GT(compared, 1000000);
}

TEST(HostCudaFp16Test, FloatToBFloat16AgreesWithTheCpuBackend) {
  for (uint32_t b : Inputs()) {
    const float f = FromBits(b);
    const uint16_t device = Bits(__float2bfloat16_rn(f)), cpu = FloatToBFloat16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(BFloat16IsNan(device) && BFloat16IsNan(cpu)) << std::hex << b;
    } else {
      ASSERT_EQ(device, cpu) << "float bits 0x" << std::hex << b << " (" << f << ")";
    }
  }
}

TEST(HostCudaFp16Test, EverySixteenBitValueWidensAlike) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float from_half = __half2float(__ushort_as_half(h)), from_bf16 = __bfloat162float(__ushort_as_bfloat16(h));
    if (HalfIsNan(h)) {
      ASSERT_TRUE(std::isnan(from_half) && std::isnan(HalfToFloat(h))) << std::hex << b;
    } else {
      ASSERT_EQ(Bits(from_half), Bits(HalfToFloat(h))) << std::hex << b;
    }
    if (BFloat16IsNan(h)) {
      ASSERT_TRUE(std::isnan(from_bf16) && std::isnan(BFloat16ToFloat(h))) << std::hex << b;
    } else {
      ASSERT_EQ(Bits(from_bf16), Bits(BFloat16ToFloat(h))) << std::hex << b;
    }
  }
}

// The same conversions inside kernel source: each thread stores its value as
// __half and __nv_bfloat16.
__global__ void StoreSixteenBitKernel(const float* x, __half* h, __nv_bfloat16* b, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  h[i] = __float2half_rn(x[i]);
  b[i] = __float2bfloat16_rn(x[i]);
}

TEST(HostCudaFp16Test, KernelsStoreAsTheCpuBackendRounds) {
  const int n = 1000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = std::ldexp(1.0f + static_cast<float>(i) / 1024.0f, i % 40 - 28);
  std::vector<__half> h(n);
  std::vector<__nv_bfloat16> b(n);
  ASSERT_TRUE(host_cuda::Launch(4, 256, 0, StoreSixteenBitKernel, x.data(), h.data(), b.data(), n));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(Bits(h[i]), FloatToHalf(x[i])) << x[i];
    ASSERT_EQ(Bits(b[i]), FloatToBFloat16(x[i])) << x[i];
  }
}

}  // namespace
