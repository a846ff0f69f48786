// The harness's execution model: grids and blocks, schedules, barriers, warp
// operations, and the errors it detects (each test asserts the message).
#include "engine/kernels/testing/host_cuda.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

namespace {

using ::testing::HasSubstr;

// ---- kernels ----

// Block sums of x by warp shuffles and shared memory; any blockDim.x up to
// 1024: lanes past a partial last warp are left out of its masks.
__global__ void BlockSumKernel(const float* x, int n, float* sums) {
  __shared__ float warp_sums[32];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  float v = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += x[i];
  const unsigned active = __ballot_sync(0xffffffffu, 1);  // this warp's lanes
  for (unsigned offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_down_sync(active, v, offset);
    if (lane + offset < 32 && (active >> (lane + offset) & 1u)) v += other;
  }
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? warp_sums[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) sums[blockIdx.x] = v;
  }
}

// The classic full-mask warp sum, wrong for a partial last warp: its lanes
// read lanes that do not exist (undefined on the device, poison here).
__global__ void NaiveWarpSumKernel(const float* x, float* out) {
  float v = x[threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  out[threadIdx.x] = v;
}

// y = 2x + 1 by a grid-stride loop over a 3-D grid of 3-D blocks; counts the
// visits of each element.
__global__ void GridStrideKernel(const float* x, int n, float* y, int* visits) {
  const unsigned block_threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const int stride = static_cast<int>(block_threads * gridDim.x * gridDim.y * gridDim.z);
  for (int i = static_cast<int>(block * block_threads + thread); i < n; i += stride) {
    y[i] = 2.0f * x[i] + 1.0f;
    atomicAdd(&visits[i], 1);
  }
}

// order[thread] = the position at which each thread first ran.
__global__ void RunOrderKernel(int* ticket, int* order) { order[threadIdx.x] = atomicAdd(ticket, 1); }

// Shuffles with widths and partial masks, votes; one result slot per op and thread.
constexpr int kVoteSlots = 10;
__global__ void WarpOpsKernel(int* r) {
  const int t = threadIdx.x, lane = t % 32;
  int* mine = r + t * kVoteSlots;
  const int pred = lane % 3 == 0;
  mine[0] = __shfl_sync(0xffffffffu, 100 * lane, 3, 8);
  mine[1] = __shfl_up_sync(0xffffffffu, 100 * lane, 2, 16);
  mine[2] = __shfl_down_sync(0xffffffffu, 100 * lane, 5, 8);
  mine[3] = __shfl_xor_sync(0xffffffffu, 100 * lane, 16, 8);  // later segment: own; earlier: allowed
  mine[4] = static_cast<int>(__ballot_sync(0xffffffffu, pred));
  if (lane % 2 == 0) {  // even lanes only
    mine[5] = static_cast<int>(__ballot_sync(0x55555555u, lane < 10));
    mine[6] = __all_sync(0x55555555u, lane % 2 == 0);
    mine[7] = __any_sync(0x55555555u, lane == 30);
    mine[8] = __shfl_xor_sync(0x55555555u, 100 * lane, 2);
  }
  mine[9] = __syncthreads_count(pred) * 10000 + __syncthreads_and(t >= 0) * 100 + __syncthreads_or(t == 5);
}

// Within each block, out[t] = x[t - 1] (out[0] = x[0]) through shared
// memory; kBarrier = false leaves out the barrier between writes and reads.
template <bool kBarrier>
__global__ void ShiftKernel(const float* x, float* out) {
  __shared__ float s[256];
  const unsigned t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  if (kBarrier) __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[t > 0 ? t - 1 : 0];
}

// out[t] = sum over tiles of the tile's sum, the tiles streaming through
// shared memory; kSecondBarrier = false leaves out the barrier that keeps the
// next tile's load from overwriting the one still being read.
template <bool kSecondBarrier>
__global__ void TiledSumKernel(const float* x, int tiles, float* out) {
  __shared__ float tile[64];
  float acc = 0.0f;
  for (int k = 0; k < tiles; ++k) {
    tile[threadIdx.x] = x[k * blockDim.x + threadIdx.x];
    __syncthreads();
    for (unsigned j = 0; j < blockDim.x; ++j) acc += tile[j];
    if (kSecondBarrier) __syncthreads();
  }
  out[threadIdx.x] = acc;
}

__global__ void ExitBeforeBarrierKernel(float* out) {
  if (threadIdx.x == 5) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void DifferentBarriersKernel(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

__global__ void ShuffleWithExitedLaneKernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x % 32 == 7) return;
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

__global__ void LaneAtBarrierKernel(float* out) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x == 3) __syncthreads();
  v = __shfl_sync(0xffffffffu, v, 0);
  out[threadIdx.x] = v;
}

__global__ void MaskWithoutCallerKernel(float* out) { out[threadIdx.x] = __shfl_sync(0xfffffffeu, 1.0f, 1); }

__global__ void BadWidthKernel(float* out) { out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1, 12); }

__global__ void TrapKernel(float* out) {
  if (threadIdx.x == 10) __trap();
  out[threadIdx.x] = 1.0f;
}

// ---- helpers ----

std::vector<float> Iota(int n, float start, float step) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i % 97);
  return v;
}

int CountWrong(const std::vector<float>& got, const std::vector<float>& want) {
  int wrong = 0;
  for (size_t i = 0; i < got.size(); ++i)
    wrong += !(std::fabs(got[i] - want[i]) <= 1e-4f * (1.0f + std::fabs(want[i])));
  return wrong;
}

// ---- tests ----

TEST(HostCudaTest, BlockReductionOverFullAndPartialWarps) {
  for (unsigned threads : {32u, 96u, 100u, 1024u}) {
    for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
      SCOPED_TRACE(::testing::Message() << "blockDim " << threads << ", " << host_cuda::ToString(schedule));
      const unsigned blocks = 3;
      const int n = static_cast<int>(blocks * threads * 2 + 17);
      const std::vector<float> x = Iota(n, -1.0f, 0.03125f);
      std::vector<float> sums(blocks, NAN);
      ASSERT_TRUE(host_cuda::Launch(schedule, blocks, threads, 0, BlockSumKernel, x.data(), n, sums.data()));
      std::vector<double> want(blocks, 0.0);
      for (int i = 0; i < n; ++i) want[i / threads % blocks] += x[i];  // the grid-stride loop's share
      for (unsigned b = 0; b < blocks; ++b) EXPECT_NEAR(sums[b], want[b], 1e-3) << "block " << b;
    }
  }
}

TEST(HostCudaTest, FullMaskShuffleInAPartialWarpReadsPoison) {
  const std::vector<float> x(100, 1.0f);
  std::vector<float> out(100, 0.0f);
  ASSERT_TRUE(host_cuda::Launch(1, 100, 0, NaiveWarpSumKernel, x.data(), out.data()));
  for (int t = 0; t < 96; ++t) EXPECT_EQ(out[t], 32.0f) << t;
  for (int t = 96; t < 100; ++t) EXPECT_TRUE(std::isnan(out[t])) << t;  // lanes 4..31 of warp 3 do not exist
}

TEST(HostCudaTest, GridStrideOverOddSizesAnd3dGrids) {
  struct Shape {
    dim3 grid, block;
  };
  const Shape shapes[] = {
      {dim3(3, 2, 2), dim3(5, 3, 2)}, {dim3(1, 1, 1), dim3(7, 1, 1)}, {dim3(2, 3, 1), dim3(32, 2, 2)}};
  for (const Shape& s : shapes) {
    for (int n : {1, 7, 361, 1001, 4099}) {
      for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
        SCOPED_TRACE(::testing::Message() << "n " << n << ", grid " << s.grid.x << "x" << s.grid.y << "x" << s.grid.z
                                          << ", " << host_cuda::ToString(schedule));
        const std::vector<float> x = Iota(n, 0.5f, 1.0f);
        std::vector<float> y(n, NAN);
        std::vector<int> visits(n, 0);
        ASSERT_TRUE(
            host_cuda::Launch(schedule, s.grid, s.block, 0, GridStrideKernel, x.data(), n, y.data(), visits.data()));
        for (int i = 0; i < n; ++i) {
          ASSERT_EQ(y[i], 2.0f * x[i] + 1.0f) << i;
          ASSERT_EQ(visits[i], 1) << i;
        }
      }
    }
  }
}

TEST(HostCudaTest, SchedulesOrderThreadsAsDocumented) {
  const int n = 64;
  std::vector<std::vector<int>> orders;
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    int ticket = 0;
    std::vector<int> order(n, -1);
    ASSERT_TRUE(host_cuda::Launch(schedule, 1, n, 0, RunOrderKernel, &ticket, order.data()));
    orders.push_back(order);
  }
  for (int t = 0; t < n; ++t) {
    EXPECT_EQ(orders[0][t], t);          // in order
    EXPECT_EQ(orders[1][t], n - 1 - t);  // reversed
  }
  std::vector<int> sorted = orders[2];
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);      // a permutation,
  EXPECT_NE(orders[2], orders[0]);  // shuffled,
  int ticket = 0;
  std::vector<int> again(n, -1);
  ASSERT_TRUE(host_cuda::Launch(host_cuda::TestSchedules()[2], 1, n, 0, RunOrderKernel, &ticket, again.data()));
  EXPECT_EQ(again, orders[2]);  // the same every run
}

TEST(HostCudaTest, ShufflesAndVotesWithWidthsAndPartialMasks) {
  const int threads = 48;  // warp 1 has 16 lanes
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    SCOPED_TRACE(host_cuda::ToString(schedule));
    std::vector<int> r(threads * kVoteSlots, -7);
    ASSERT_TRUE(host_cuda::Launch(schedule, 1, threads, 0, WarpOpsKernel, r.data()));
    for (int t = 0; t < threads; ++t) {
      SCOPED_TRACE(::testing::Message() << "thread " << t);
      const int lane = t % 32, warp_lanes = t < 32 ? 32 : 16;
      const int* got = &r[t * kVoteSlots];
      EXPECT_EQ(got[0], 100 * (lane / 8 * 8 + 3));
      EXPECT_EQ(got[1], lane % 16 < 2 ? 100 * lane : 100 * (lane - 2));
      EXPECT_EQ(got[2], lane % 8 + 5 < 8 ? 100 * (lane + 5) : 100 * lane);
      const int xor_src = lane ^ 16;  // allowed only into an earlier segment; lanes 16+ of warp 1 do not exist
      EXPECT_EQ(got[3], xor_src > lane ? 100 * lane : 100 * xor_src);
      unsigned ballot = 0;
      for (int l = 0; l < warp_lanes; ++l) ballot |= (l % 3 == 0 ? 1u : 0u) << l;
      EXPECT_EQ(static_cast<unsigned>(got[4]), ballot);
      if (lane % 2 == 0) {
        unsigned even_small = 0;
        for (int l = 0; l < std::min(warp_lanes, 10); l += 2) even_small |= 1u << l;
        EXPECT_EQ(static_cast<unsigned>(got[5]), even_small);
        EXPECT_EQ(got[6], 1);
        EXPECT_EQ(got[7], warp_lanes == 32 ? 1 : 0);  // lane 30 exists only in warp 0
        EXPECT_EQ(got[8], 100 * (lane ^ 2));
      } else {
        EXPECT_EQ(got[5], -7);
      }
      EXPECT_EQ(got[9], 17 * 10000 + 1 * 100 + 1);  // 11 + 6 threads have t % 32 % 3 == 0
    }
  }
}

// The demonstration that the schedules catch a missing barrier: with it,
// every schedule gives the right answer; without it, at least one does not.
TEST(HostCudaTest, RemovedBarrierIsCaughtBySomeSchedule) {
  const int threads = 64, blocks = 2;
  const std::vector<float> x = Iota(threads * blocks, 1.0f, 1.0f);
  std::vector<float> want(x.size());
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < threads; ++t) want[b * threads + t] = x[b * threads + std::max(t - 1, 0)];
  }
  int schedules_wrong = 0;
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    std::vector<float> with(x.size(), NAN), without(x.size(), NAN);
    ASSERT_TRUE(host_cuda::Launch(schedule, blocks, threads, 0, ShiftKernel<true>, x.data(), with.data()));
    ASSERT_TRUE(host_cuda::Launch(schedule, blocks, threads, 0, ShiftKernel<false>, x.data(), without.data()));
    EXPECT_EQ(CountWrong(with, want), 0) << host_cuda::ToString(schedule);
    const int wrong = CountWrong(without, want);
    std::printf("shift without its barrier, %s: %d of %zu outputs wrong\n", host_cuda::ToString(schedule).c_str(),
                wrong, want.size());
    schedules_wrong += wrong > 0;
  }
  // In order, each thread reads the element its predecessor has just written:
  // right by luck. Reversed and shuffled catch it.
  EXPECT_EQ(schedules_wrong, 2);
}

TEST(HostCudaTest, MissingSecondBarrierInATileLoopIsCaught) {
  const int threads = 64, tiles = 3;
  const std::vector<float> x = Iota(threads * tiles, -2.0f, 0.25f);
  const float want = std::accumulate(x.begin(), x.end(), 0.0f);
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    std::vector<float> with(threads, NAN), without(threads, NAN);
    ASSERT_TRUE(host_cuda::Launch(schedule, 1, threads, 0, TiledSumKernel<true>, x.data(), tiles, with.data()));
    ASSERT_TRUE(host_cuda::Launch(schedule, 1, threads, 0, TiledSumKernel<false>, x.data(), tiles, without.data()));
    const int wrong = CountWrong(without, std::vector<float>(threads, want));
    std::printf("tile loop without its second barrier, %s: %d of %d outputs wrong\n",
                host_cuda::ToString(schedule).c_str(), wrong, threads);
    EXPECT_EQ(CountWrong(with, std::vector<float>(threads, want)), 0) << host_cuda::ToString(schedule);
    EXPECT_GT(wrong, 0) << host_cuda::ToString(schedule);  // every schedule: the first thread overwrites early
  }
}

TEST(HostCudaTest, BarrierAThreadExitedBeforeIsDetected) {
  std::vector<float> out(64, 0.0f);
  const host_cuda::LaunchResult r = host_cuda::Launch(2, 64, 0, ExitBeforeBarrierKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_THAT(r.error, HasSubstr("block (0,0,0): __syncthreads at engine/kernels/testing/host_cuda_test.cc:"));
  EXPECT_THAT(r.error, HasSubstr("is reached by 63 of 64 threads; thread (5,0,0) exited without reaching it"));
}

TEST(HostCudaTest, DifferentBarriersAreDetected) {
  std::vector<float> out(64, 0.0f);
  const host_cuda::LaunchResult r = host_cuda::Launch(1, 64, 0, DifferentBarriersKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_THAT(r.error, HasSubstr("block (0,0,0): threads wait at different barriers: __syncthreads at"));
  EXPECT_THAT(r.error, HasSubstr("(thread (0,0,0)) and __syncthreads at"));
  EXPECT_THAT(r.error, HasSubstr("(thread (32,0,0))"));
}

TEST(HostCudaTest, ShuffleNamingAnExitedLaneIsDetected) {
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    std::vector<float> out(64, 0.0f);
    const host_cuda::LaunchResult r = host_cuda::Launch(schedule, 1, 64, 0, ShuffleWithExitedLaneKernel, out.data());
    ASSERT_FALSE(r.ok) << host_cuda::ToString(schedule);
    EXPECT_THAT(r.error, HasSubstr("__shfl_xor_sync at engine/kernels/testing/host_cuda_test.cc:"));
    EXPECT_THAT(r.error, HasSubstr("with mask 0xffffffff"));
    EXPECT_THAT(r.error, HasSubstr("waits for lane 7 (thread (7,0,0)), which has exited"));
  }
}

TEST(HostCudaTest, LaneWaitingAtABarrierInsteadOfAShuffleIsDetected) {
  std::vector<float> out(32, 0.0f);
  const host_cuda::LaunchResult r = host_cuda::Launch(1, 32, 0, LaneAtBarrierKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_THAT(r.error, HasSubstr("__shfl_sync at"));
  EXPECT_THAT(r.error, HasSubstr("waits for lane 3 (thread (3,0,0)), which waits at __syncthreads at"));
}

TEST(HostCudaTest, MaskWithoutTheCallingLaneAndBadWidthAreDetected) {
  std::vector<float> out(32, 0.0f);
  host_cuda::LaunchResult r = host_cuda::Launch(1, 32, 0, MaskWithoutCallerKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_THAT(r.error, HasSubstr("block (0,0,0) thread (0,0,0): __shfl_sync at"));
  EXPECT_THAT(r.error, HasSubstr("mask 0xfffffffe does not name the calling lane 0"));
  r = host_cuda::Launch(1, 32, 0, BadWidthKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_THAT(r.error, HasSubstr("__shfl_down_sync at"));
  EXPECT_THAT(r.error, HasSubstr("width 12 is not a power of two in [1, 32]"));
}

TEST(HostCudaTest, TrapIsDetected) {
  std::vector<float> out(64, 0.0f);
  const host_cuda::LaunchResult r = host_cuda::Launch(dim3(2), dim3(32, 2), 0, TrapKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_THAT(r.error,
              HasSubstr("block (0,0,0) thread (10,0,0): __trap() at engine/kernels/testing/host_cuda_test.cc:"));
}

TEST(HostCudaTest, InvalidConfigurationsAreRejected) {
  std::vector<float> out(2048, 0.0f);
  EXPECT_THAT(host_cuda::Launch(1, 1025, 0, TrapKernel, out.data()).error,
              HasSubstr("invalid configuration: block (1025,1,1)"));
  EXPECT_THAT(host_cuda::Launch(1, dim3(32, 32, 2), 0, TrapKernel, out.data()).error,
              HasSubstr("invalid configuration: block (32,32,2)"));
  EXPECT_THAT(host_cuda::Launch(dim3(0), 32, 0, TrapKernel, out.data()).error,
              HasSubstr("invalid configuration: grid (0,1,1)"));
  EXPECT_THAT(host_cuda::Launch(1, 32, 300 * 1024, TrapKernel, out.data()).error,
              HasSubstr("307200 bytes of dynamic shared memory"));
}

TEST(HostCudaTest, MathBitAndAtomicBuiltinsFollowCuda) {
  EXPECT_EQ(min(3, -2), -2);
  EXPECT_EQ(max(-1, 2u), 0xffffffffu);  // mixed signedness: compared as unsigned, as CUDA does
  EXPECT_EQ(min(int64_t{5}, int64_t{-7}), -7);
  EXPECT_EQ(max(1.5f, 2.5), 2.5);
  EXPECT_EQ(min(NAN, 1.0f), 1.0f);  // fminf
  EXPECT_EQ(__popc(0xf0f0u), 8);
  EXPECT_EQ(__ffs(0), 0);
  EXPECT_EQ(__ffs(8), 4);
  EXPECT_EQ(__clz(1), 31);
  EXPECT_EQ(__clz(0), 32);
  EXPECT_EQ(__brev(1u), 0x80000000u);
  EXPECT_EQ(__saturatef(NAN), 0.0f);
  EXPECT_EQ(__saturatef(2.0f), 1.0f);
  EXPECT_EQ(__float_as_uint(1.0f), 0x3f800000u);
  EXPECT_EQ(__int_as_float(0x40000000), 2.0f);
  EXPECT_EQ(rsqrtf(4.0f), 0.5f);
  EXPECT_NEAR(__expf(1.0f), 2.7182817f, 1e-6f);
  EXPECT_NEAR(__logf(10.0f), 2.3025851f, 1e-6f);
  unsigned u = 5;
  EXPECT_EQ(atomicInc(&u, 5u), 5u);
  EXPECT_EQ(u, 0u);  // wrapped: old >= limit
  EXPECT_EQ(atomicDec(&u, 7u), 0u);
  EXPECT_EQ(u, 7u);  // wrapped: old == 0
  int i = 0x7fffffff;
  EXPECT_EQ(atomicAdd(&i, 1), 0x7fffffff);
  EXPECT_EQ(i, -0x7fffffff - 1);  // two's complement wrap, as on the device
}

TEST(HostCudaTest, LambdaKernelsAndAssertionResult) {
  int hits = 0;
  const host_cuda::LaunchResult ok = host_cuda::Launch(dim3(2, 2), dim3(4, 4), 0, [&hits] { atomicAdd(&hits, 1); });
  EXPECT_TRUE(ok);
  EXPECT_EQ(hits, 64);
  const ::testing::AssertionResult failed = host_cuda::Launch(1, 32, 0, [] { __trap(); });
  EXPECT_FALSE(failed);
  EXPECT_THAT(failed.message(), HasSubstr("__trap() at"));
}

}  // namespace
