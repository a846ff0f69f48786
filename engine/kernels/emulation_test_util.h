// Helpers of the kernels' host emulation tests (*_emulation_test.cc): the
// storage types as gtest type parameters, conversions between f32 values and
// storage, NaN-filled outputs, the CPU backend of a storage type, and the
// comparisons the tests state (bitwise, or within a bound). Include after
// engine/kernels/testing/host_cuda.h.
#ifndef RINGMASTER_ENGINE_KERNELS_EMULATION_TEST_UTIL_H_
#define RINGMASTER_ENGINE_KERNELS_EMULATION_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/cpu_backend.h"
#include "engine/core/dtype.h"
#include "engine/core/tensor.h"
#include "engine/core/test_util.h"
#include "engine/kernels/device_util.cuh"

namespace ringmaster::kernels::testing {

using engine::DType;
using engine::Tensor;

// The storage types every activation kernel is instantiated for.
using StorageTypes = ::testing::Types<float, __half, __nv_bfloat16>;

template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, __half>) {
    return DType::kF16;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return DType::kBF16;
  } else {
    return DType::kF32;
  }
}

// gtest's names for the typed tests: f32, f16, bf16.
struct StorageNames {
  template <typename T>
  static std::string GetName(int) {
    return engine::DTypeName(DTypeOf<T>());
  }
};

// x rounded to T (round to nearest even) and back, as the CPU backend rounds.
template <typename T>
float Round(float x) {
  return engine::RoundTo(DTypeOf<T>(), x);
}

template <typename T>
std::vector<float> Rounded(std::vector<float> v) {
  for (float& x : v) x = Round<T>(x);
  return v;
}

// f32 values stored as T, and back.
template <typename T>
std::vector<T> Store(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FromFloat<T>(v[i]);
  return out;
}

template <typename T>
std::vector<float> Load(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToFloat(v[i]);
  return out;
}

// n elements of T, every one NaN: an element the kernel does not write stays NaN.
template <typename T>
std::vector<T> NaNs(size_t n) {
  return std::vector<T>(n, FromFloat<T>(std::numeric_limits<float>::quiet_NaN()));
}

// Random values in [lo, hi) rounded to T (what a 16-bit activation holds).
template <typename T>
std::vector<float> RandomValues(int64_t n, uint64_t seed, float lo = -2.0f, float hi = 2.0f) {
  return Rounded<T>(engine::testing::RandomVec(n, seed, lo, hi));
}

// The CPU backend computing in T's precision (its outputs rounded to T).
template <typename T>
engine::CpuBackend& Cpu() {
  static engine::CpuBackend cpu(engine::CpuBackendConfig{2, DTypeOf<T>()});
  return cpu;
}

inline Tensor F32Tensor(const std::vector<float>& v) {
  return Tensor::FromVector({static_cast<int64_t>(v.size())}, v);
}
inline std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

// One unit in the last place of T at |x| (the spacing of T's values there;
// the smallest subnormal's spacing near 0).
template <typename T>
double Ulp(double x) {
  const int mantissa = DTypeOf<T>() == DType::kF32 ? 23 : DTypeOf<T>() == DType::kF16 ? 10 : 7;
  const int min_exp = DTypeOf<T>() == DType::kF16 ? -14 : -126;
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| in [2^(e-1), 2^e)
  const int exponent = std::max(e - 1, min_exp);
  return std::ldexp(1.0, exponent - mantissa);
}

// Every got[i] equals want[i] (== for numbers, so +0 == -0; NaN on both sides
// agrees; NaN on one side is a difference).
inline ::testing::AssertionResult SameValues(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  }
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!same && bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " differ; first at " << first << ": got "
                                       << got[first] << ", want " << want[first];
}

// |got[i] - want[i]| <= tol(i) for every i (NaN on either side fails).
inline ::testing::AssertionResult Within(const std::vector<float>& got, const std::vector<float>& want,
                                         const std::function<double(size_t)>& tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  }
  int64_t bad = 0, first = -1;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= tol(i))) {
      if (bad++ == 0) first = static_cast<int64_t>(i);
    } else {
      worst = std::max(worst, d / std::max(tol(i), 1e-300));
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess() << "worst " << worst << " of the tolerance";
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " outside the tolerance; first at "
                                       << first << ": got " << got[first] << ", want " << want[first]
                                       << ", tolerance " << tol(first);
}

// Sizes of the elementwise tests: one element, partial warps (31, 33), several
// blocks of whole packs (1000), and a tail after the packs of 4 or 8 (4099).
inline const std::vector<int64_t>& TestSizes() {
  static const std::vector<int64_t> sizes = {1, 31, 33, 1000, 4099};
  return sizes;
}

}  // namespace ringmaster::kernels::testing

#endif  // RINGMASTER_ENGINE_KERNELS_EMULATION_TEST_UTIL_H_
