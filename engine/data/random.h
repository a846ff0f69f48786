#ifndef RINGMASTER_ENGINE_DATA_RANDOM_H_
#define RINGMASTER_ENGINE_DATA_RANDOM_H_

// Bounded integers and seed mixing for data order and synthetic data, on top of
// engine/core/random.h. Specified bit for bit (rejection sampling), unlike
// std::shuffle and std::uniform_int_distribution, whose results differ between
// standard libraries: a data order must be the same on every machine of a job.

#include <cstdint>

#include "engine/core/random.h"

namespace ringmaster::engine {

// A seed derived from two values, e.g. (seed, epoch) or (seed, sample index).
inline uint64_t MixSeed(uint64_t a, uint64_t b) { return SplitMix64(a ^ SplitMix64(b ^ 0x5851f42d4c957f2dULL)); }

// Uniform in [0, bound), bound > 0, without modulo bias.
inline uint64_t UniformBelow(Rng& rng, uint64_t bound) {
  const uint64_t limit = -bound % bound;  // 2^64 mod bound: values below it are rejected
  for (;;) {
    const uint64_t r = rng.Next();
    if (r >= limit) return r % bound;
  }
}

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_DATA_RANDOM_H_
