// The polling that bounds every NCCL wait (driven by a FakeClock, no sleeping
// for real), and NcclComm's behaviour without a communicator or a device.
#include "engine/dist/nccl_comm.h"

#include <cuda_runtime.h>

#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

TEST(PollUntilTest, ReturnsOnceDone) {
  FakeClock clock;
  int calls = 0;
  absl::Status status = PollUntil(clock, clock.Now() + absl::Seconds(1), [&]() -> absl::StatusOr<bool> {
    return ++calls == 3;
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(calls, 3);
}

TEST(PollUntilTest, ReturnsTheFirstError) {
  FakeClock clock;
  absl::Status status = PollUntil(clock, clock.Now() + absl::Seconds(1), []() -> absl::StatusOr<bool> {
    return absl::UnavailableError("peer lost");
  });
  EXPECT_EQ(status, absl::UnavailableError("peer lost"));
}

TEST(PollUntilTest, GivesUpAtTheDeadline) {
  FakeClock clock;
  const absl::Time deadline = clock.Now() + absl::Seconds(30);
  // Once the poller sleeps (after its spin), move time past the deadline.
  std::thread advancer([&] {
    while (clock.Sleepers() == 0) std::this_thread::yield();
    clock.Advance(absl::Seconds(31));
  });
  int calls = 0;
  absl::Status status = PollUntil(clock, deadline, [&]() -> absl::StatusOr<bool> {
    ++calls;
    return false;
  });
  advancer.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message(), "timed out after 31s");  // the time that passed
  EXPECT_GT(calls, 1);
}

TEST(AnnotateTest, KeepsTheCodeAndPrefixesTheMessage) {
  EXPECT_EQ(Annotate(absl::DeadlineExceededError("timed out"), "allreduce on dp[2 ranks] rank 1"),
            absl::DeadlineExceededError("allreduce on dp[2 ranks] rank 1: timed out"));
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

TEST(NcclCommTest, AnEmptyCommunicatorIsAFailedPrecondition) {
  NcclComm comm;
  EXPECT_EQ(comm.get(), nullptr);
  EXPECT_EQ(comm.AsyncError(), absl::FailedPreconditionError("the NCCL communicator was aborted"));
  FakeClock clock;
  EXPECT_EQ(comm.WaitReady(clock.Now()).code(), absl::StatusCode::kFailedPrecondition);
  comm.Abort();  // nothing to abort
  EXPECT_EQ(comm.Split(0, 0, "x", clock.Now()).status(),
            absl::FailedPreconditionError("split of an aborted communicator"));
}

TEST(NcclCommTest, InitWithoutADeviceFailsAtOnce) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    GTEST_SKIP() << "a CUDA device is present: init is exercised by the group tests";
  }
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  FakeClock clock;  // never advanced: any wait would hang the test
  absl::StatusOr<NcclComm> comm =
      NcclComm::InitRank(id, 1, 0, "solo", clock, clock.Now() + absl::Seconds(10), absl::Seconds(1));
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(comm.status().message(), "ncclUnhandledCudaError (1): unhandled cuda error"))
      << comm.status();
}

}  // namespace
}  // namespace ringmaster::engine::dist
