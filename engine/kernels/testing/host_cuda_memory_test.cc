// The harness's memory: atomics from every thread, static and dynamic shared
// memory (poisoned at every block start), and the faults it reports instead
// of crashing (stack overflow, dynamic shared memory overrun, bad addresses).
#include "engine/kernels/testing/host_cuda.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace {

using ::testing::HasSubstr;

struct Counters {
  float f_sum;
  double d_sum;
  int i_sum;
  unsigned u_sum;
  unsigned long long ull_sum;
  int i_max, i_min;
  int cas_count;
  int exch_last;
  unsigned bits_or;
};

// Every thread of every block updates the same counters; tickets[] receives
// each thread's old value of a shared int counter.
__global__ void AtomicsKernel(Counters* c, int* tickets) {
  const int g = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&c->f_sum, 0.5f);
  atomicAdd(&c->d_sum, 0.25);
  tickets[g] = atomicAdd(&c->i_sum, 1);
  atomicAdd(&c->u_sum, 2u);
  atomicAdd(&c->ull_sum, 3ull);
  atomicMax(&c->i_max, (g * 7919) % 1000 - 500);
  atomicMin(&c->i_min, (g * 7919) % 1000 - 500);
  int old = c->cas_count, assumed;
  do {
    assumed = old;
    old = atomicCAS(&c->cas_count, assumed, assumed + 1);
  } while (old != assumed);
  atomicExch(&c->exch_last, g);
  __syncthreads();  // interleave the blocks' threads differently per schedule
  atomicOr(&c->bits_or, 1u << (g % 32));
}

// Reads `s` before any thread writes it: poison.
__global__ void ReadStaticSharedFirstKernel(float* out, int* out_int, float* out_half, float* out_bf16) {
  __shared__ float s[64];
  __shared__ int si[64];
  __shared__ __half sh[64];
  __shared__ __nv_bfloat16 sb[64];
  const unsigned t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
  out[g] = s[t];
  out_int[g] = si[t];
  out_half[g] = __half2float(sh[t]);
  out_bf16[g] = __bfloat162float(sb[t]);
  __syncthreads();
  s[t] = 1.0f;  // what block 0 leaves behind must not reach block 1
  si[t] = 1;
  sh[t] = __float2half_rn(1.0f);
  sb[t] = __float2bfloat16_rn(1.0f);
}

// A template device helper with its own static shared scratch (like a block
// reduction's), read before written.
template <typename T>
__device__ T ReadScratch(unsigned i) {
  __shared__ T scratch[32];
  return scratch[i];
}

__global__ void ReadHelperScratchKernel(double* out) { out[threadIdx.x] = ReadScratch<double>(threadIdx.x % 32); }

// Reverses each block's segment of x through dynamic shared memory; reads
// one element before the barrier (poison, or the previous block's data if the
// poison were missing).
__global__ void DynamicReverseKernel(const float* x, float* out, float* early) {
  float* s = DynamicSharedMemory<float>();
  const unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
  early[base + t] = s[t];
  __syncthreads();
  s[t] = x[base + t];
  __syncthreads();
  out[base + t] = s[blockDim.x - 1 - t];
}

__global__ void DynamicOverrunKernel(float* out) {
  float* s = DynamicSharedMemory<float>();
  s[threadIdx.x] = 1.0f;
  out[threadIdx.x] = s[threadIdx.x];
}

// Lanes pair up through shared memory, ordered by __syncwarp on half-warp masks.
__global__ void SyncWarpExchangeKernel(int* out) {
  __shared__ int s[64];
  const unsigned t = threadIdx.x, lane = t % 32;
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  s[t] = static_cast<int>(t * 3);
  __syncwarp(half);
  out[t] = s[t ^ 1];
}

constexpr int kBigFrame = 40000;  // floats: 160 KB, past a 64 KiB stack

__global__ void BigFrameKernel(float* out) {
  volatile float frame[kBigFrame];
  for (int i = 0; i < kBigFrame; ++i) frame[i] = static_cast<float>(i);
  out[threadIdx.x] = frame[kBigFrame - 1 - threadIdx.x];
}

__global__ void StoreThroughKernel(int* p, int* out) {
  if (threadIdx.x == 3) *p = 1;  // p is null
  out[threadIdx.x] = 1;
}

__global__ void AbortKernel(int* out) {
  if (threadIdx.x == 4) std::abort();  // what a failed assert does
  out[threadIdx.x] = 1;
}

__global__ void DivideKernel(int* out, int offset) {
  out[threadIdx.x] = 100 / (static_cast<int>(threadIdx.x) - offset);
}

bool AllNan(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isnan(x); });
}

TEST(HostCudaMemoryTest, AtomicsFromEveryThread) {
  const unsigned blocks = 4, threads = 96;
  const int n = static_cast<int>(blocks * threads);
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    SCOPED_TRACE(host_cuda::ToString(schedule));
    Counters c{};
    c.i_max = -1000000;
    c.i_min = 1000000;
    std::vector<int> tickets(n, -1);
    ASSERT_TRUE(host_cuda::Launch(schedule, blocks, threads, 0, AtomicsKernel, &c, tickets.data()));
    EXPECT_EQ(c.f_sum, 0.5f * n);
    EXPECT_EQ(c.d_sum, 0.25 * n);
    EXPECT_EQ(c.i_sum, n);
    EXPECT_EQ(c.u_sum, 2u * n);
    EXPECT_EQ(c.ull_sum, 3ull * n);
    int want_max = -1000, want_min = 1000;
    for (int g = 0; g < n; ++g) {
      want_max = std::max(want_max, (g * 7919) % 1000 - 500);
      want_min = std::min(want_min, (g * 7919) % 1000 - 500);
    }
    EXPECT_EQ(c.i_max, want_max);
    EXPECT_EQ(c.i_min, want_min);
    EXPECT_EQ(c.cas_count, n);
    EXPECT_GE(c.exch_last, 0);
    EXPECT_LT(c.exch_last, n);
    EXPECT_EQ(c.bits_or, 0xffffffffu);
    std::vector<int> sorted = tickets;  // every thread got a distinct old value
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
  }
}

TEST(HostCudaMemoryTest, StaticSharedMemoryIsPoisonedAtEveryBlock) {
  const unsigned blocks = 3, threads = 64;
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    SCOPED_TRACE(host_cuda::ToString(schedule));
    std::vector<float> f(blocks * threads, 0.0f), h(blocks * threads, 0.0f), b(blocks * threads, 0.0f);
    std::vector<int> i(blocks * threads, 0);
    ASSERT_TRUE(host_cuda::Launch(schedule, blocks, threads, 0, ReadStaticSharedFirstKernel, f.data(), i.data(),
                                  h.data(), b.data()));
    EXPECT_TRUE(AllNan(f));
    EXPECT_TRUE(AllNan(h));
    EXPECT_TRUE(AllNan(b));
    EXPECT_TRUE(std::all_of(i.begin(), i.end(), [](int x) { return x == -1; }));
  }
  std::vector<double> d(64, 0.0);
  ASSERT_TRUE(host_cuda::Launch(2, 64, 0, ReadHelperScratchKernel, d.data()));
  EXPECT_TRUE(std::all_of(d.begin(), d.end(), [](double x) { return std::isnan(x); }));
}

TEST(HostCudaMemoryTest, DynamicSharedMemorySizedByTheLaunchAndPoisoned) {
  const unsigned blocks = 3, threads = 100;
  std::vector<float> x(blocks * threads);
  std::iota(x.begin(), x.end(), 1.0f);
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    SCOPED_TRACE(host_cuda::ToString(schedule));
    std::vector<float> out(x.size(), NAN), early(x.size(), 0.0f);
    ASSERT_TRUE(host_cuda::Launch(schedule, blocks, threads, threads * sizeof(float), DynamicReverseKernel, x.data(),
                                  out.data(), early.data()));
    for (unsigned b = 0; b < blocks; ++b) {
      for (unsigned t = 0; t < threads; ++t) ASSERT_EQ(out[b * threads + t], x[b * threads + threads - 1 - t]);
    }
    EXPECT_TRUE(AllNan(early));
  }
}

TEST(HostCudaMemoryTest, DynamicSharedMemoryOverrunIsDetected) {
  std::vector<float> out(64, 0.0f);
  EXPECT_TRUE(host_cuda::Launch(1, 64, 64 * sizeof(float), DynamicOverrunKernel, out.data()));
  const host_cuda::LaunchResult r = host_cuda::Launch(1, 64, 60 * sizeof(float), DynamicOverrunKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error, "block (0,0,0) thread (60,0,0): accessed past the end of the 240 bytes of dynamic shared memory");
}

TEST(HostCudaMemoryTest, SyncWarpOrdersPartialMaskExchanges) {
  for (const host_cuda::LaunchOptions& schedule : host_cuda::TestSchedules()) {
    std::vector<int> out(64, -1);
    ASSERT_TRUE(host_cuda::Launch(schedule, 1, 64, 0, SyncWarpExchangeKernel, out.data()));
    for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], (t ^ 1) * 3) << host_cuda::ToString(schedule) << " thread " << t;
  }
}

TEST(HostCudaMemoryTest, StackOverflowIsDetectedAndABiggerStackRuns) {
  std::vector<float> out(4, 0.0f);
  const host_cuda::LaunchResult r = host_cuda::Launch(1, 4, 0, BigFrameKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error,
            "block (0,0,0) thread (0,0,0): overflowed its 65536-byte stack (raise LaunchOptions::stack_bytes)");
  host_cuda::LaunchOptions big;
  big.stack_bytes = size_t{1} << 20;
  ASSERT_TRUE(host_cuda::Launch(big, 1, 4, 0, BigFrameKernel, out.data()));
  EXPECT_EQ(out[3], static_cast<float>(kBigFrame - 4));
}

TEST(HostCudaMemoryTest, BadAddressesDivisionByZeroAndAbortAreReported) {
  std::vector<int> out(8, 0);
  host_cuda::LaunchResult r = host_cuda::Launch(1, 8, 0, StoreThroughKernel, static_cast<int*>(nullptr), out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error, "block (0,0,0) thread (3,0,0): invalid memory access at (nil) (SIGSEGV)");
  r = host_cuda::Launch(1, 8, 0, DivideKernel, out.data(), 5);
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error, "block (0,0,0) thread (5,0,0): arithmetic exception (SIGFPE: an integer division by zero?)");
  r = host_cuda::Launch(1, 8, 0, AbortKernel, out.data());
  ASSERT_FALSE(r.ok);
  EXPECT_EQ(r.error, "block (0,0,0) thread (4,0,0): aborted (SIGABRT: a failed assert?)");
  EXPECT_TRUE(host_cuda::Launch(1, 8, 0, DivideKernel, out.data(), 100));  // the harness still works
  EXPECT_EQ(out[7], 100 / (7 - 100));
}

}  // namespace
