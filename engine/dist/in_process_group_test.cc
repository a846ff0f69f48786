#include "engine/dist/in_process_group.h"

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "engine/core/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using ::testing::HasSubstr;

// Runs body(group) on one thread per rank and returns each rank's status.
std::vector<absl::Status> RunRanks(const std::shared_ptr<InProcessWorld>& world,
                                   const std::function<absl::Status(ProcessGroup&)>& body) {
  std::vector<absl::Status> statuses(world->size());
  std::vector<std::unique_ptr<InProcessGroup>> groups;
  for (int r = 0; r < world->size(); ++r) groups.push_back(world->Group(r));
  std::vector<std::thread> threads;
  for (int r = 0; r < world->size(); ++r) {
    threads.emplace_back([&, r] { statuses[r] = body(*groups[r]); });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) EXPECT_TRUE(statuses[r].ok()) << r << ": " << statuses[r];
}

// Rank r's input: values that do not add up exactly in f32, so that the
// summation order shows in the bits.
std::vector<float> Input(int rank, int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = 0.1f * (rank + 1) + 1.37f * i + 1e-3f * rank * i;
  return v;
}

std::shared_ptr<InProcessWorld> MakeWorld(int size, absl::Duration timeout = absl::Seconds(10),
                                          Clock* clock = nullptr) {
  InProcessOptions options;
  options.timeout = timeout;
  options.clock = clock;
  return InProcessWorld::Create(size, options);
}

class InProcessGroupSizeTest : public ::testing::TestWithParam<int> {};

TEST_P(InProcessGroupSizeTest, AllReduceSumIsTheSequentialSumBitForBit) {
  const int size = GetParam(), n = 37;
  std::vector<float> expected = Input(0, n);
  for (int r = 1; r < size; ++r) {
    std::vector<float> in = Input(r, n);
    for (int i = 0; i < n; ++i) expected[i] = expected[i] + in[i];
  }
  auto world = MakeWorld(size);
  ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    Tensor t = Tensor::FromVector({n}, Input(g.rank(), n));
    absl::Status s = g.AllReduce(t, ReduceOp::kSum);
    if (!s.ok()) return s;
    EXPECT_EQ(0, std::memcmp(t.f32(), expected.data(), n * sizeof(float))) << "rank " << g.rank();
    return absl::OkStatus();
  }));
}

TEST_P(InProcessGroupSizeTest, AllReduceAvgDividesTheSum) {
  const int size = GetParam(), n = 8;
  auto world = MakeWorld(size);
  ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    Tensor t = Tensor::FromVector({2, 4}, std::vector<float>(n, static_cast<float>(g.rank() + 1)));
    absl::Status s = g.AllReduce(t, ReduceOp::kAvg);
    // (1 + 2 + ... + size) / size
    EXPECT_THAT(t.ToVector(), ::testing::Each((size + 1) / 2.0f));
    return s;
  }));
}

TEST_P(InProcessGroupSizeTest, ReduceScatterGivesEachRankItsReducedChunk) {
  const int size = GetParam(), chunk = 3;
  auto world = MakeWorld(size);
  ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    std::vector<float> in(size * chunk);
    for (int i = 0; i < size * chunk; ++i) in[i] = 100.0f * g.rank() + i;
    Tensor input = Tensor::FromVector({size * chunk}, in);
    Tensor output = Tensor::Zeros({chunk});
    absl::Status s = g.ReduceScatter(input, output, ReduceOp::kSum);
    std::vector<float> expected(chunk);
    for (int j = 0; j < chunk; ++j) {
      for (int r = 0; r < size; ++r) expected[j] += 100.0f * r + g.rank() * chunk + j;
    }
    EXPECT_EQ(output.ToVector(), expected) << "rank " << g.rank();
    return s;
  }));
}

TEST_P(InProcessGroupSizeTest, AllGatherConcatenatesInRankOrder) {
  const int size = GetParam();
  auto world = MakeWorld(size);
  ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    Tensor input = Tensor::FromInts({2}, {10 * g.rank(), 10 * g.rank() + 1});
    Tensor output = Tensor::Empty({size, 2}, DType::kI32);
    absl::Status s = g.AllGather(input, output);
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(output.i32()[2 * r], 10 * r);
      EXPECT_EQ(output.i32()[2 * r + 1], 10 * r + 1);
    }
    return s;
  }));
}

TEST_P(InProcessGroupSizeTest, BroadcastFromEveryRoot) {
  const int size = GetParam();
  auto world = MakeWorld(size);
  ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    for (int root = 0; root < size; ++root) {
      Tensor t = Tensor::FromVector({3}, std::vector<float>(3, static_cast<float>(g.rank())));
      absl::Status s = g.Broadcast(t, root);
      if (!s.ok()) return s;
      EXPECT_THAT(t.ToVector(), ::testing::Each(static_cast<float>(root)));
    }
    return g.Barrier();
  }));
}

TEST_P(InProcessGroupSizeTest, SendRecvAroundTheRing) {
  const int size = GetParam();
  auto world = MakeWorld(size);
  if (size == 1) {
    absl::Status self = world->Group(0)->Send(Tensor::Zeros({1}), 0, 0);
    EXPECT_EQ(self.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(self.message(), "send on world[1 rank] rank 0: destination 0 is this rank itself");
    return;
  }
  ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    const int next = (g.rank() + 1) % size, prev = (g.rank() + size - 1) % size;
    // Send first on every rank: Send must not wait for the matching Recv.
    absl::Status s = g.Send(Tensor::FromVector({2}, {1.0f * g.rank(), 7.0f}), next, 5);
    if (!s.ok()) return s;
    Tensor got = Tensor::Zeros({2});
    s = g.Recv(got, prev, 5);
    EXPECT_EQ(got.ToVector(), (std::vector<float>{1.0f * prev, 7.0f}));
    return s;
  }));
}

INSTANTIATE_TEST_SUITE_P(Sizes, InProcessGroupSizeTest, ::testing::Values(1, 2, 3, 4));

TEST(InProcessGroupTest, HalfAndBFloat16ReduceInF32AndRoundOnce) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const int size = 3, n = 16;
    // Widened inputs and the expected result: f32 sum, one rounding.
    std::vector<std::vector<uint16_t>> bits(size, std::vector<uint16_t>(n));
    std::vector<uint16_t> expected(n);
    for (int i = 0; i < n; ++i) {
      float sum = 0;
      for (int r = 0; r < size; ++r) {
        float x = 1.0f + 0.001f * (i + 1) * (r + 1);
        bits[r][i] = dtype == DType::kF16 ? FloatToHalf(x) : FloatToBFloat16(x);
        sum += dtype == DType::kF16 ? HalfToFloat(bits[r][i]) : BFloat16ToFloat(bits[r][i]);
      }
      expected[i] = dtype == DType::kF16 ? FloatToHalf(sum) : FloatToBFloat16(sum);
    }
    auto world = MakeWorld(size);
    ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
      Tensor t = Tensor::Empty({n}, dtype);
      std::memcpy(t.u16(), bits[g.rank()].data(), n * 2);
      absl::Status s = g.AllReduce(t, ReduceOp::kSum);
      EXPECT_EQ(std::vector<uint16_t>(t.u16(), t.u16() + n), expected) << DTypeName(dtype);
      return s;
    }));
  }
}

TEST(InProcessGroupTest, SubGroupsReduceWithinTheirMembersOnly) {
  auto world = MakeWorld(4);
  ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    auto even = g.NewGroup({0, 2}, "even");
    auto odd = g.NewGroup({1, 3}, "odd");
    if (!even.ok()) return even.status();
    if (!odd.ok()) return odd.status();
    const bool is_even = g.rank() % 2 == 0;
    EXPECT_EQ(*even == nullptr, !is_even);
    EXPECT_EQ(*odd == nullptr, is_even);
    ProcessGroup& mine = is_even ? **even : **odd;
    EXPECT_EQ(mine.name(), is_even ? "even[2 ranks]" : "odd[2 ranks]");
    EXPECT_EQ(mine.size(), 2);
    EXPECT_EQ(mine.rank(), g.rank() / 2);
    Tensor t = Tensor::FromVector({1}, {static_cast<float>(g.rank())});
    absl::Status s = mine.AllReduce(t, ReduceOp::kSum);
    EXPECT_EQ(t.f32()[0], is_even ? 0 + 2 : 1 + 3);
    if (!s.ok()) return s;
    return g.Barrier();  // the parent still works
  }));
}

TEST(InProcessGroupTest, RecvMatchesBySourceAndTagInAnyOrder) {
  auto world = MakeWorld(2);
  ExpectAllOk(RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    if (g.rank() == 0) {
      const std::vector<std::pair<int, float>> sends = {{1, 10}, {2, 20}, {3, 30}, {2, 21}, {7, 99}};
      for (const auto& [tag, value] : sends) {
        absl::Status s = g.Send(Tensor::FromVector({1}, {value}), 1, tag);
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }
    std::vector<float> got;
    for (int tag : {3, 7, 2, 1, 2}) {
      Tensor t = Tensor::Zeros({1});
      absl::Status s = g.Recv(t, 0, tag);
      if (!s.ok()) return s;
      got.push_back(t.f32()[0]);
    }
    // Same tag: first sent, first received.
    EXPECT_EQ(got, (std::vector<float>{30, 99, 20, 10, 21}));
    return absl::OkStatus();
  }));
}

TEST(InProcessGroupTest, RankThatNeverJoinsGivesDeadlineExceededThenAborted) {
  const absl::Duration timeout = absl::Milliseconds(200);
  auto world = MakeWorld(3, timeout);
  std::vector<std::unique_ptr<InProcessGroup>> groups;
  for (int r = 0; r < 3; ++r) groups.push_back(world->Group(r));
  std::vector<absl::Status> first(2), second(2);
  std::vector<absl::Duration> elapsed(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {  // rank 2 never calls
    threads.emplace_back([&, r] {
      Tensor t = Tensor::Zeros({4});
      absl::Time start = absl::Now();
      first[r] = groups[r]->AllReduce(t, ReduceOp::kSum);
      elapsed[r] = absl::Now() - start;
      second[r] = groups[r]->Barrier();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(first[r].code(), absl::StatusCode::kDeadlineExceeded) << first[r];
    EXPECT_THAT(first[r].message(),
                HasSubstr(absl::StrCat("allreduce on world[3 ranks] rank ", r, ": timed out after "
                                       "200ms waiting for ranks [2] to join")));
    EXPECT_GE(elapsed[r], timeout);
    EXPECT_LT(elapsed[r], timeout + absl::Seconds(2));
    EXPECT_EQ(second[r].code(), absl::StatusCode::kAborted) << second[r];
    EXPECT_THAT(second[r].message(),
                HasSubstr("barrier on world[3 ranks] rank " + std::to_string(r) +
                          ": the group is broken by an earlier error: allreduce"));
  }
}

TEST(InProcessGroupTest, DeadlineFollowsTheInjectedClock) {
  FakeClock clock;
  auto world = MakeWorld(2, absl::Minutes(5), &clock);
  auto group = world->Group(0);
  absl::Status status;
  std::thread rank0([&] { status = group->Barrier(); });
  while (world->Waiters() < 1) std::this_thread::yield();
  clock.Advance(absl::Minutes(5));
  rank0.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(status.message(), HasSubstr("barrier on world[2 ranks] rank 0: timed out after 5m"));
}

TEST(InProcessGroupTest, KilledRankMakesPeersUnavailableAndItselfAborted) {
  FakeClock clock;  // never advanced: the errors must not come from a timeout
  auto world = MakeWorld(3, absl::Seconds(1), &clock);
  std::vector<std::unique_ptr<InProcessGroup>> groups;
  for (int r = 0; r < 3; ++r) groups.push_back(world->Group(r));
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Tensor t = Tensor::Zeros({2});
      statuses[r] = groups[r]->AllReduce(t, ReduceOp::kSum);
    });
  }
  while (world->Waiters() < 2) std::this_thread::yield();
  world->Kill(2);
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kUnavailable) << statuses[r];
    EXPECT_THAT(statuses[r].message(),
                HasSubstr(absl::StrCat("allreduce on world[3 ranks] rank ", r,
                                       ": rank 2 left the group (it was killed) before ranks [2] "
                                       "to join")));
  }
  absl::Status killed = groups[2]->Barrier();
  EXPECT_EQ(killed.code(), absl::StatusCode::kAborted) << killed;
  EXPECT_EQ(killed.message(), "barrier on world[3 ranks] rank 2: this rank was killed");
}

TEST(InProcessGroupTest, RecvFromAKilledRankIsUnavailable) {
  FakeClock clock;
  auto world = MakeWorld(2, absl::Seconds(1), &clock);
  auto group = world->Group(1);
  absl::Status recv;
  std::thread rank1([&] {
    Tensor t = Tensor::Zeros({2});
    recv = group->Recv(t, 0, 3);
  });
  while (world->Waiters() < 1) std::this_thread::yield();
  world->Kill(0);
  rank1.join();
  EXPECT_EQ(recv.code(), absl::StatusCode::kUnavailable) << recv;
  EXPECT_EQ(recv.message(), "recv on world[2 ranks] rank 1: rank 0 left the group (it was killed) "
                            "before a message from rank 0 with tag 3");
}

TEST(InProcessGroupTest, MismatchedCollectivesAreInvalidArgumentOnEveryRank) {
  auto world = MakeWorld(2);
  auto statuses = RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    Tensor t = Tensor::Zeros({4});
    return g.rank() == 0 ? g.AllReduce(t, ReduceOp::kSum) : g.Broadcast(t, 0);
  });
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("ranks disagree"));
  }
  EXPECT_THAT(statuses[0].message(),
              HasSubstr("rank 0 called allreduce f32[4] sum, rank 1 called broadcast f32[4] from "
                        "root 0"));
}

TEST(InProcessGroupTest, LocalArgumentErrorsBreakTheGroup) {
  auto world = MakeWorld(1);
  auto group = world->Group(0);
  Tensor ints = Tensor::FromInts({2}, {1, 2});
  absl::Status s = group->AllReduce(ints, ReduceOp::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "allreduce on world[1 rank] rank 0: the tensor has dtype i32; "
                         "reductions take f32, f16 or bf16");
  EXPECT_EQ(group->Barrier().code(), absl::StatusCode::kAborted);

  auto world2 = MakeWorld(2);
  auto g = world2->Group(0);
  s = g->ReduceScatter(Tensor::Zeros({5}), Tensor::Zeros({2}), ReduceOp::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("expected 2 x 2 = 4 elements"));
  auto world3 = MakeWorld(2);
  s = world3->Group(1)->Broadcast(Tensor::Zeros({1}), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("root 2 is not a rank of the group (0..1)"));
}

TEST(InProcessGroupTest, RecvOfTheWrongShapeIsInvalidArgument) {
  auto world = MakeWorld(2);
  auto statuses = RunRanks(world, [&](ProcessGroup& g) -> absl::Status {
    if (g.rank() == 0) return g.Send(Tensor::Zeros({3}), 1, 4);
    Tensor t = Tensor::Zeros({2});
    return g.Recv(t, 0, 4);
  });
  EXPECT_TRUE(statuses[0].ok());
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(statuses[1].message(),
              HasSubstr("recv on world[2 ranks] rank 1: rank 0 sent f32[3] with tag 4, this rank "
                        "expects f32[2]"));
}

}  // namespace
}  // namespace ringmaster::engine::dist
