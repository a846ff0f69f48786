#ifndef RINGMASTER_ENGINE_CORE_RANDOM_H_
#define RINGMASTER_ENGINE_CORE_RANDOM_H_

// Deterministic random numbers for initialisation and dropout, identical on
// every platform (no std::*_distribution, whose algorithms are unspecified).
//   Rng: a sequential xoshiro256** stream seeded through splitmix64.
//   HashUniform: a counter-based draw, a pure function of (key, index), so a
//     dropout mask does not depend on thread count or call order.

#include <cmath>
#include <cstdint>
#include <string_view>

namespace ringmaster::engine {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a of a string, for deriving per-parameter seeds from names.
inline uint64_t HashName(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

// Uniform in [0, 1) with 24 random bits, from (key, index).
inline float HashUniform(uint64_t key, uint64_t index) {
  uint64_t h = SplitMix64(key ^ SplitMix64(index));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : s_) {
      x = SplitMix64(x);
      s = x;
    }
  }
  uint64_t Next() {
    uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Standard normal (Box-Muller; one value per call, the second discarded).
  double Normal() {
    double u1 = Uniform();
    double u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_RANDOM_H_
