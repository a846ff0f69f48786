// NcclProcessGroup across the GPUs of this machine, one thread per GPU (one
// rank each): every operation's result, sub-groups, point to point, and a rank
// that stops taking part. Skips with a message where fewer than 2 GPUs exist.
#include <algorithm>
#include <atomic>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "engine/dist/nccl_device_tensor.h"
#include "engine/dist/nccl_fake_store.h"
#include "engine/dist/nccl_process_group.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using testing::DeviceTensor;
using testing::FakeStore;
using P2P = NcclProcessGroup::P2P;

int DeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

#define REQUIRE_GPUS(n)                                                                       \
  if (DeviceCount() < (n))                                                                    \
  GTEST_SKIP() << "fewer than " << (n) << " CUDA devices (" << DeviceCount()                  \
               << "): multi-GPU NCCL not exercised"

// Runs body(group) on one thread per rank, rank r on GPU r, all joined through
// one store. Failures inside threads are recorded by gtest (thread-safe).
void RunRanks(int size, absl::Duration timeout, const std::function<void(NcclProcessGroup&)>& body) {
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      NcclGroupOptions options;
      options.rank = rank;
      options.size = size;
      options.device = rank;
      options.timeout = timeout;
      options.communicator = "multi";
      options.name = "dp";
      auto group = NcclProcessGroup::Create(&ids, options);
      ASSERT_TRUE(group.ok()) << group.status();
      body(**group);
    });
  }
  for (std::thread& t : threads) t.join();
}

int WorldSize() { return std::min(DeviceCount(), 8); }

TEST(NcclMultiGpuTest, CollectivesComputeAcrossRanks) {
  REQUIRE_GPUS(2);
  const int n = WorldSize();
  RunRanks(n, absl::Seconds(120), [n](NcclProcessGroup& group) {
    const int r = group.rank();
    EXPECT_EQ(group.name(), "dp[" + std::to_string(n) + " ranks]");
    // allreduce: element i of rank r is r + i.
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      auto t = DeviceTensor::FromFloats({3}, {float(r), float(r + 1), float(r + 2)}, dtype);
      ASSERT_TRUE(group.AllReduce(t->tensor(), ReduceOp::kSum).ok());
      const float base = n * (n - 1) / 2.0f;
      EXPECT_EQ(*t->ToFloats(), (std::vector<float>{base, base + n, base + 2 * n})) << DTypeName(dtype);
      auto avg = DeviceTensor::FromFloats({1}, {float(2 * r)}, dtype);
      ASSERT_TRUE(group.AllReduce(avg->tensor(), ReduceOp::kAvg).ok());
      EXPECT_EQ((*avg->ToFloats())[0], float(n - 1)) << DTypeName(dtype);
    }
    // reduce-scatter: every rank contributes 1..2n; rank r gets chunk r summed.
    std::vector<float> all(2 * n);
    std::iota(all.begin(), all.end(), 1.0f);
    auto in = DeviceTensor::FromFloats({2 * n}, all);
    auto out = DeviceTensor::Zeros({2});
    ASSERT_TRUE(group.ReduceScatter(in->tensor(), out->tensor(), ReduceOp::kSum).ok());
    EXPECT_EQ(*out->ToFloats(), (std::vector<float>{float(n * (2 * r + 1)), float(n * (2 * r + 2))}));
    // all-gather: chunk q is rank q's [q, 10q].
    auto mine = DeviceTensor::FromFloats({2}, {float(r), float(10 * r)});
    auto gathered = DeviceTensor::Zeros({n, 2});
    ASSERT_TRUE(group.AllGather(mine->tensor(), gathered->tensor()).ok());
    std::vector<float> expected;
    for (int q = 0; q < n; ++q) expected.insert(expected.end(), {float(q), float(10 * q)});
    EXPECT_EQ(*gathered->ToFloats(), expected);
    // broadcast from the last rank, i32.
    auto b = DeviceTensor::FromFloats({2}, {float(r), float(-r)}, DType::kI32);
    ASSERT_TRUE(group.Broadcast(b->tensor(), n - 1).ok());
    EXPECT_EQ(*b->ToFloats(), (std::vector<float>{float(n - 1), float(1 - n)}));
    EXPECT_TRUE(group.Barrier().ok());
  });
}

TEST(NcclMultiGpuTest, PointToPoint) {
  REQUIRE_GPUS(2);
  const int n = WorldSize();
  RunRanks(n, absl::Seconds(120), [n](NcclProcessGroup& group) {
    const int r = group.rank();
    // A ring exchange in both directions at once needs one batch.
    auto to_next = DeviceTensor::FromFloats({4}, std::vector<float>(4, float(r)));
    auto from_prev = DeviceTensor::Zeros({4});
    ASSERT_TRUE(group
                    .SendRecv({{P2P::kSend, to_next->tensor(), (r + 1) % n},
                               {P2P::kRecv, from_prev->tensor(), (r + n - 1) % n}})
                    .ok());
    EXPECT_EQ(*from_prev->ToFloats(), std::vector<float>(4, float((r + n - 1) % n)));
    // Plain Send/Recv between pairs (0 -> 1, 2 -> 3, ...).
    if (r % 2 == 0 && r + 1 < n) {
      auto t = DeviceTensor::FromFloats({2}, {float(r), 42.0f});
      EXPECT_TRUE(group.Send(t->tensor(), r + 1, /*tag=*/7).ok());
    } else if (r % 2 == 1) {
      auto t = DeviceTensor::Zeros({2});
      EXPECT_TRUE(group.Recv(t->tensor(), r - 1, /*tag=*/7).ok());
      EXPECT_EQ(*t->ToFloats(), (std::vector<float>{float(r - 1), 42.0f}));
    }
    EXPECT_TRUE(group.Barrier().ok());
  });
}

TEST(NcclMultiGpuTest, SubGroupsSplitTheWorld) {
  REQUIRE_GPUS(2);
  const int n = WorldSize();
  std::vector<int> evens, odds;
  for (int r = 0; r < n; ++r) (r % 2 == 0 ? evens : odds).push_back(r);
  RunRanks(n, absl::Seconds(120), [&](NcclProcessGroup& group) {
    const int r = group.rank();
    // Every rank makes both sub-groups, in the same order.
    auto even = group.NewGroup(evens, "even");
    ASSERT_TRUE(even.ok()) << even.status();
    auto odd = group.NewGroup(odds, "odd");
    ASSERT_TRUE(odd.ok()) << odd.status();
    const bool is_even = r % 2 == 0;
    EXPECT_EQ(*even == nullptr, !is_even);
    EXPECT_EQ(*odd == nullptr, is_even);
    ProcessGroup& mine = is_even ? **even : **odd;
    const std::vector<int>& members = is_even ? evens : odds;
    EXPECT_EQ(mine.size(), static_cast<int>(members.size()));
    EXPECT_EQ(mine.rank(), r / 2);
    auto t = DeviceTensor::FromFloats({1}, {float(r)});
    ASSERT_TRUE(mine.AllReduce(t->tensor(), ReduceOp::kSum).ok());
    EXPECT_EQ((*t->ToFloats())[0], float(std::accumulate(members.begin(), members.end(), 0)));
    EXPECT_TRUE(group.Barrier().ok()) << "the parent still works";
  });
}

TEST(NcclMultiGpuTest, ARankThatStopsTakingPartIsDeadlineExceededThenAborted) {
  REQUIRE_GPUS(2);
  const absl::Duration timeout = absl::Seconds(3);
  std::atomic<bool> rank0_done{false};
  RunRanks(2, timeout, [&](NcclProcessGroup& group) {
    auto t = DeviceTensor::FromFloats({1}, {1.0f});
    if (group.rank() == 1) {
      // Rank 1 skips the allreduce; it waits for rank 0 to give up first.
      while (!rank0_done) absl::SleepFor(absl::Milliseconds(10));
      return;
    }
    const absl::Time start = absl::Now();
    absl::Status status = group.AllReduce(t->tensor(), ReduceOp::kSum);
    const absl::Duration waited = absl::Now() - start;
    rank0_done = true;
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_TRUE(absl::StartsWith(status.message(),
                                 "allreduce on dp[2 ranks] rank 0: not every rank of the group took part in "
                                 "time: timed out after"))
        << status;
    EXPECT_GE(waited, timeout);
    EXPECT_LT(waited, timeout + absl::Seconds(15));
    EXPECT_EQ(group.Barrier().code(), absl::StatusCode::kAborted);
  });
}

TEST(NcclMultiGpuTest, ATensorOnAnotherGpuIsInvalid) {
  REQUIRE_GPUS(2);
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  NcclGroupOptions options;
  options.timeout = absl::Seconds(60);
  auto group = NcclProcessGroup::Create(&ids, options);  // rank 0 of 1, GPU 0
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  auto elsewhere = DeviceTensor::Zeros({4});
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  absl::Status status = (*group)->AllReduce(elsewhere->tensor(), ReduceOp::kSum);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "tensor is on CUDA device 1; this group uses device 0"))
      << status;
}

}  // namespace
}  // namespace ringmaster::engine::dist
