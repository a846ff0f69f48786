// A multi-tensor table on the host for the optimizer kernels' emulation tests
// (grad_norm, optim_update): parameters of sizes that leave partial chunks
// and partial warps, an empty one, and a mix of decayed and excluded entries.
#ifndef RINGMASTER_ENGINE_KERNELS_OPTIM_EMULATION_TEST_UTIL_H_
#define RINGMASTER_ENGINE_KERNELS_OPTIM_EMULATION_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "engine/core/test_util.h"
#include "engine/kernels/optim_multi_tensor.h"

namespace ringmaster::kernels::testing {

// Sizes: one element, partial warps, a partial chunk, several chunks with a
// partial last one (4099 = one chunk + 3; 9000 = two chunks + 808), none.
inline const std::vector<int64_t>& TableSizes() {
  static const std::vector<int64_t> sizes = {1, 31, 33, 1000, 4099, 0, 9000};
  return sizes;
}

// Host arrays behind a table: w, g, s0, s1 per entry; `entries` and `chunks`
// are what a launch reads (host memory stands in for device memory).
struct HostTable {
  std::vector<std::vector<float>> w, g, s0, s1;
  std::vector<MultiTensorEntry> entries;
  std::vector<TensorChunk> chunks;

  // Random weights and gradients (gradients times `grad_magnitude`), states
  // random and non-negative for s1 (Adam's second moment); entry i decays
  // with weight_decay (trust 1) when i is even, else not (0, trust 0).
  HostTable(uint64_t seed, float weight_decay, float grad_magnitude = 1.0f) {
    const std::vector<int64_t>& sizes = TableSizes();
    w.resize(sizes.size());
    g.resize(sizes.size());
    s0.resize(sizes.size());
    s1.resize(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t n = sizes[i];
      w[i] = engine::testing::RandomVec(n, seed + 10 * i);
      g[i] = engine::testing::RandomVec(n, seed + 10 * i + 1, -grad_magnitude, grad_magnitude);
      s0[i] = engine::testing::RandomVec(n, seed + 10 * i + 2, -0.1f, 0.1f);
      s1[i] = engine::testing::RandomVec(n, seed + 10 * i + 3, 0.0f, 0.01f);
      MultiTensorEntry e;
      e.w = w[i].data();
      e.g = g[i].data();
      e.s0 = s0[i].data();
      e.s1 = s1[i].data();
      e.n = n;
      e.weight_decay = i % 2 == 0 ? weight_decay : 0.0f;
      e.trust = i % 2 == 0 ? 1 : 0;
      entries.push_back(e);
    }
    chunks = MakeTensorChunks(entries);
  }
  HostTable(const HostTable&) = delete;
  HostTable& operator=(const HostTable&) = delete;

  MultiTensorTable table() const {
    return MultiTensorTable{entries.data(), chunks.data(), static_cast<int>(entries.size()),
                            static_cast<int>(chunks.size())};
  }
};

}  // namespace ringmaster::kernels::testing

#endif  // RINGMASTER_ENGINE_KERNELS_OPTIM_EMULATION_TEST_UTIL_H_
