#ifndef RINGMASTER_ENGINE_CORE_TEST_UTIL_H_
#define RINGMASTER_ENGINE_CORE_TEST_UTIL_H_

// Helpers shared by the engine's tests: seeded random tensors and comparisons.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/core/random.h"
#include "engine/core/tensor.h"

namespace ringmaster::engine::testing {

inline std::vector<float> RandomVec(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.Uniform(lo, hi));
  return v;
}

inline Tensor RandomTensor(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return Tensor::FromVector(shape, RandomVec(NumElements(shape), seed, lo, hi));
}

// max_i |a_i - b_i| / (atol + rtol-free scale): the largest absolute difference.
inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    // A NaN on one side only is a difference (std::max would drop it); NaN on both sides agrees.
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    if (std::isnan(a[i])) continue;
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return m;
}

inline double MaxAbs(const std::vector<float>& a) {
  double m = 0.0;
  for (float x : a) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// Largest difference relative to the larger magnitude of the reference (>= 1e-6).
inline double MaxRelDiff(const std::vector<float>& got, const std::vector<float>& want) {
  return MaxAbsDiff(got, want) / std::max(1e-6, MaxAbs(want));
}

inline bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() && std::equal(static_cast<const char*>(a.raw()),
                                              static_cast<const char*>(a.raw()) + a.bytes(),
                                              static_cast<const char*>(b.raw()));
}

}  // namespace ringmaster::engine::testing

#endif  // RINGMASTER_ENGINE_CORE_TEST_UTIL_H_
