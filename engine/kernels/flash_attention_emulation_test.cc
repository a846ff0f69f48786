// The flash attention kernels' own source (flash_attention_kernels.cuh) run on
// the host: every CUDA thread of a block is a std::thread, __syncthreads a
// barrier, blocks one after another. Checks the kernels' indexing, tiling,
// masking, barriers and that every output element is written (outputs start
// as NaN) against the CPU twin, without a GPU. It says nothing about device
// code generation, timing or the 16-bit rounding (RoundTo is the identity
// here: fp32 only); the GPU tests in engine/cuda/cuda_attention_test.cc do.

#include <pthread.h>

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/core/flash_attention_reference.h"
#include "engine/core/test_util.h"
#include "engine/kernels/flash_limits.h"

// ---- the CUDA constructs the kernels use, on the host ----
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define __shared__ static  // one block runs at a time
#define __align__(n) __attribute__((aligned(n)))

namespace {

struct HostDim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local HostDim3 threadIdx;
HostDim3 blockIdx, blockDim, gridDim;
pthread_barrier_t block_barrier;

void __syncthreads() { pthread_barrier_wait(&block_barrier); }

struct float4 {
  float x, y, z, w;
};

}  // namespace

namespace ringmaster::kernels {
// As in kernel_types.h and flash_attention.h (which include the CUDA runtime).
enum class FloatType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
struct AttentionDims {
  int64_t b, t, nh, hd;
};
inline float RoundTo(FloatType /*t*/, float f) { return f; }
}  // namespace ringmaster::kernels

#include "engine/kernels/flash_attention_kernels.cuh"

namespace ringmaster::kernels {
namespace {

using engine::testing::MaxRelDiff;
using engine::testing::RandomTensor;

bool AllFinite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// Runs body() as a grid of gx x gy blocks of `threads` threads.
template <typename Body>
void Launch(unsigned gx, unsigned gy, unsigned threads, Body body) {
  gridDim = {gx, gy, 1};
  blockDim = {threads, 1, 1};
  for (unsigned y = 0; y < gy; ++y) {
    for (unsigned x = 0; x < gx; ++x) {
      blockIdx = {x, y, 0};
      ASSERT_EQ(pthread_barrier_init(&block_barrier, nullptr, threads), 0);
      std::vector<std::thread> block;
      for (unsigned t = 0; t < threads; ++t) {
        block.emplace_back([&body, t] {
          threadIdx = {t, 0, 0};
          body();
        });
      }
      for (std::thread& th : block) th.join();
      pthread_barrier_destroy(&block_barrier);
    }
  }
}

TEST(FlashAttentionEmulationTest, KernelsMatchTheCpuTwin) {
  struct Case {
    int64_t b, t, nh, hd;
  };
  // T below, at and past the 64-row tiles; padded head sizes; B * H > 1; T = 1.
  const Case cases[] = {{2, 17, 3, 8}, {1, 1, 2, 64}, {2, 100, 3, 64}, {1, 130, 2, 32}, {1, 64, 1, 16}};
  uint64_t seed = 500;
  for (const Case& s : cases) {
    SCOPED_TRACE(::testing::Message() << "b=" << s.b << " t=" << s.t << " nh=" << s.nh << " hd=" << s.hd);
    const int64_t c = s.nh * s.hd, rows = s.b * s.nh * s.t;
    const std::vector<float> qkv = RandomTensor({s.b, s.t, 3 * c}, ++seed, -2.0f, 2.0f).ToVector();
    const std::vector<float> dout = RandomTensor({s.b, s.t, c}, ++seed).ToVector();
    std::vector<float> out(s.b * s.t * c, NAN), lse(rows, NAN), dsum(rows, NAN), dqkv(qkv.size(), NAN);
    const AttentionDims d{s.b, s.t, s.nh, s.hd};
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    const unsigned heads = static_cast<unsigned>(s.b * s.nh);
    const unsigned q_tiles = static_cast<unsigned>((s.t + flash::kQRows - 1) / flash::kQRows);
    const unsigned kv_tiles = static_cast<unsigned>((s.t + flash::kKvRows - 1) / flash::kKvRows);
    const FloatType f32 = FloatType::kF32;
    Launch(heads, q_tiles, flash::kQRows,
           [&] { flash::FlashForwardKernel(qkv.data(), d, scale, out.data(), lse.data(), f32); });
    Launch(2, 1, 32, [&] { flash::RowDotKernel(out.data(), dout.data(), d, dsum.data()); });
    Launch(heads, kv_tiles, flash::kKvRows, [&] {
      flash::FlashBackwardKvKernel(qkv.data(), dout.data(), lse.data(), dsum.data(), d, scale, dqkv.data(), f32);
    });
    Launch(heads, q_tiles, flash::kQRows, [&] {
      flash::FlashBackwardQKernel(qkv.data(), dout.data(), lse.data(), dsum.data(), d, scale, dqkv.data(), f32);
    });
    const engine::ref::FlashForwardResult twin = engine::ref::FlashAttentionForward(s.b, s.t, c, s.nh, qkv);
    // Outputs start as NaN: one never written stays NaN (which MaxRelDiff would not see).
    EXPECT_TRUE(AllFinite(out) && AllFinite(lse) && AllFinite(dqkv));
    EXPECT_LT(MaxRelDiff(out, twin.out), 1e-5);
    EXPECT_LT(MaxRelDiff(lse, twin.lse), 1e-5);
    EXPECT_LT(MaxRelDiff(dqkv, engine::ref::FlashAttentionBackward(s.b, s.t, c, s.nh, qkv, twin.out, twin.lse, dout)),
              1e-5);
  }
}

}  // namespace
}  // namespace ringmaster::kernels
