// NcclProcessGroup on this machine: without a device, Create fails fast with
// FAILED_PRECONDITION; with one device, a group of one rank runs every
// operation, bad arguments break the group, and a rank that never joins turns
// into DEADLINE_EXCEEDED within the timeout. Tests that need a device skip
// with a message where there is none.
#include "engine/dist/nccl_process_group.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "engine/dist/nccl_device_tensor.h"
#include "engine/dist/nccl_fake_store.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using testing::DeviceTensor;
using testing::FakeStore;

int DeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

#define REQUIRE_DEVICE()                                                                   \
  if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device present: NCCL group not exercised"

NcclGroupOptions Options(int rank, int size, absl::Duration timeout = absl::Seconds(60)) {
  NcclGroupOptions options;
  options.rank = rank;
  options.size = size;
  options.device = 0;
  options.timeout = timeout;
  options.communicator = "test";
  return options;
}

// ------------------------------------------------------------- without device

TEST(NcclProcessGroupTest, InvalidOptionsAreRejectedBeforeAnyCudaCall) {
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  absl::StatusOr<std::unique_ptr<NcclProcessGroup>> no_store = NcclProcessGroup::Create(nullptr, Options(0, 1));
  EXPECT_EQ(no_store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(no_store.status().message(),
            "joining NCCL group world[1 rank] as rank 0 on CUDA device 0: nothing to exchange the NCCL "
            "unique id through");
  auto bad_rank = NcclProcessGroup::Create(&ids, Options(2, 2));
  EXPECT_EQ(bad_rank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_rank.status().message(),
            "joining NCCL group world[2 ranks] as rank 2 on CUDA device 0: rank 2 is not a rank of a group of 2");
  auto bad_timeout = NcclProcessGroup::Create(&ids, Options(0, 1, absl::ZeroDuration()));
  EXPECT_EQ(bad_timeout.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store.set_keys().empty());
}

TEST(NcclProcessGroupTest, WithoutADeviceCreateIsAFailedPreconditionAndPublishesNothing) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present: see the device tests";
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  const absl::Time start = absl::Now();
  auto group = NcclProcessGroup::Create(&ids, Options(0, 2));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "fails fast, never waits for the timeout";
  EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(group.status().message(),
                               "joining NCCL group world[2 ranks] as rank 0 on CUDA device 0: no usable CUDA "
                               "device: cudaGetDeviceCount(&count) at engine/dist/nccl_process_group.cc:"))
      << group.status();
  EXPECT_TRUE(store.set_keys().empty()) << "a rank that cannot take part publishes no id";
}

// --------------------------------------------------------------- with device

TEST(NcclProcessGroupTest, ADeviceBeyondTheVisibleOnesIsAFailedPrecondition) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  NcclGroupOptions options = Options(0, 1);
  options.device = DeviceCount();
  auto group = NcclProcessGroup::Create(&ids, options);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(group.status().message(), "was asked for but")) << group.status();
}

TEST(NcclProcessGroupTest, OneRankRunsEveryOperation) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  auto created = NcclProcessGroup::Create(&ids, Options(0, 1));
  ASSERT_TRUE(created.ok()) << created.status();
  NcclProcessGroup& group = **created;
  EXPECT_EQ(group.name(), "world[1 rank]");
  EXPECT_STREQ(group.backend(), "nccl");
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 4.0f};

  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      auto t = DeviceTensor::FromFloats({4}, values, dtype);
      ASSERT_TRUE(t.ok()) << t.status();
      ASSERT_TRUE(group.AllReduce(t->tensor(), op).ok());
      EXPECT_EQ(*t->ToFloats(), values) << DTypeName(dtype);  // exact in every format
    }
  }
  auto in = DeviceTensor::FromFloats({4}, values);
  auto out = DeviceTensor::Zeros({4});
  ASSERT_TRUE(group.ReduceScatter(in->tensor(), out->tensor(), ReduceOp::kSum).ok());
  EXPECT_EQ(*out->ToFloats(), values);
  auto gathered = DeviceTensor::Zeros({1, 4});
  ASSERT_TRUE(group.AllGather(in->tensor(), gathered->tensor()).ok());
  EXPECT_EQ(*gathered->ToFloats(), values);
  auto ints = DeviceTensor::FromFloats({3}, {7, 8, 9}, DType::kI32);
  ASSERT_TRUE(group.Broadcast(ints->tensor(), 0).ok());
  EXPECT_EQ(*ints->ToFloats(), (std::vector<float>{7, 8, 9}));
  auto received = DeviceTensor::Zeros({4});
  ASSERT_TRUE(group
                  .SendRecv({{NcclProcessGroup::P2P::kSend, in->tensor(), 0},
                             {NcclProcessGroup::P2P::kRecv, received->tensor(), 0}})
                  .ok());
  EXPECT_EQ(*received->ToFloats(), values);
  ASSERT_TRUE(group.Barrier().ok());
  EXPECT_FALSE(group.broken());
}

TEST(NcclProcessGroupTest, EnqueuedWorkIsWaitedForOnTheHostOrOnAStream) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  auto group = NcclProcessGroup::Create(&ids, Options(0, 1));
  ASSERT_TRUE(group.ok()) << group.status();
  auto a = DeviceTensor::FromFloats({2}, {1, 2});
  auto b = DeviceTensor::FromFloats({2}, {3, 4});
  absl::StatusOr<NcclWork> first = (*group)->EnqueueAllReduce(a->tensor(), ReduceOp::kSum);
  absl::StatusOr<NcclWork> second = (*group)->EnqueueAllReduce(b->tensor(), ReduceOp::kAvg);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->op(), "allreduce");
  ASSERT_TRUE((*group)->Wait(*first).ok());
  absl::StatusOr<CudaStream> compute = CudaStream::Create();
  ASSERT_TRUE(compute.ok());
  ASSERT_TRUE((*group)->WaitOnStream(*second, compute->get()).ok());
  ASSERT_TRUE(compute->Synchronize().ok());
  EXPECT_EQ(*a->ToFloats(), (std::vector<float>{1, 2}));
  EXPECT_EQ(*b->ToFloats(), (std::vector<float>{3, 4}));
}

TEST(NcclProcessGroupTest, SubGroupOfOneRank) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  auto group = NcclProcessGroup::Create(&ids, Options(0, 1));
  ASSERT_TRUE(group.ok()) << group.status();
  auto sub = (*group)->NewGroup({0}, "dp");
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_NE(*sub, nullptr);
  EXPECT_EQ((*sub)->name(), "dp[1 rank]");
  EXPECT_EQ((*sub)->rank(), 0);
  auto t = DeviceTensor::FromFloats({2}, {5, 6});
  EXPECT_TRUE((*sub)->AllReduce(t->tensor(), ReduceOp::kSum).ok());
  EXPECT_TRUE((*group)->Barrier().ok()) << "the parent still works";
}

TEST(NcclProcessGroupTest, BadArgumentsBreakTheGroup) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  auto group = NcclProcessGroup::Create(&ids, Options(0, 1));
  ASSERT_TRUE(group.ok()) << group.status();
  absl::Status host = (*group)->AllReduce(Tensor::Zeros({4}), ReduceOp::kSum);
  EXPECT_EQ(host.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(host.message(),
            "allreduce on world[1 rank] rank 0: the tensor is a cpu tensor; this group serves CUDA tensors");
  EXPECT_TRUE((*group)->broken());
  absl::Status after = (*group)->Barrier();
  EXPECT_EQ(after.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StartsWith(after.message(),
                               "barrier on world[1 rank] rank 0: the group is broken by an earlier error: "
                               "allreduce on world[1 rank] rank 0: the tensor is a cpu tensor"))
      << after;
}

TEST(NcclProcessGroupTest, SendToItselfIsRejected) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  auto group = NcclProcessGroup::Create(&ids, Options(0, 1));
  ASSERT_TRUE(group.ok()) << group.status();
  auto t = DeviceTensor::Zeros({2});
  absl::Status status = (*group)->Send(t->tensor(), 0, /*tag=*/0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "send on world[1 rank] rank 0: destination 0 is this rank itself"))
      << status;
}

TEST(NcclProcessGroupTest, ReducingIntegersIsInvalid) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  auto group = NcclProcessGroup::Create(&ids, Options(0, 1));
  ASSERT_TRUE(group.ok()) << group.status();
  auto t = DeviceTensor::Zeros({2}, DType::kI32);
  absl::Status status = (*group)->AllReduce(t->tensor(), ReduceOp::kSum);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "the tensor has dtype i32; reductions take f32, f16 or bf16")) << status;
}

TEST(NcclProcessGroupTest, APeerThatNeverJoinsIsDeadlineExceededWithinTheTimeout) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  const absl::Duration timeout = absl::Seconds(3);
  const absl::Time start = absl::Now();
  // Rank 0 publishes the id and starts the init; rank 1 never comes.
  auto group = NcclProcessGroup::Create(&ids, Options(0, 2, timeout));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(group.status().message(),
                                "communicator init: not every one of the 2 ranks joined (aborted): timed out"))
      << group.status();
  EXPECT_GE(waited, timeout);
  EXPECT_LT(waited, timeout + absl::Seconds(15)) << "the abort returns promptly";
  EXPECT_EQ(store.set_keys(), std::vector<std::string>{"test/nccl_unique_id"});
}

TEST(NcclProcessGroupTest, WithoutRankZeroTheOthersTimeOutWaitingForTheId) {
  REQUIRE_DEVICE();
  FakeStore store;
  StoreUniqueIdExchange ids(&store);
  auto group = NcclProcessGroup::Create(&ids, Options(1, 2, absl::Milliseconds(300)));
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(group.status().message(), "for rank 0 to publish the NCCL unique id of "
                                                          "communicator \"test\""))
      << group.status();
}

}  // namespace
}  // namespace ringmaster::engine::dist
