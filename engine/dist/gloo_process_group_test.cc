// GlooProcessGroup across real processes on 127.0.0.1: every operation for
// 1..4 ranks, sub-groups, point-to-point, argument errors. Failures (a killed
// rank, a silent rank) are in gloo_failure_test.cc.

#include "engine/dist/gloo_process_group.h"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/core/tensor.h"
#include "engine/dist/collective_util.h"
#include "engine/dist/file_store.h"
#include "engine/dist/gloo_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using ::testing::HasSubstr;

void ExpectAllSucceeded(const std::vector<ChildExit>& exits, int size) {
  ASSERT_EQ(exits.size(), static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) EXPECT_TRUE(exits[r].Succeeded()) << "rank " << r << ": " << exits[r].Describe();
}

bool Equal(const Tensor& t, const std::vector<float>& expected) { return t.ToVector() == expected; }

// Every collective, checked against what it must compute (integer-valued
// floats, so any summation order gives the exact result).
void Collectives(GlooRankContext& c) {
  ProcessGroup& g = c.group;
  const int size = g.size(), rank = c.rank;
  const float sum_of_ranks = size * (size - 1) / 2.0f;
  c.check.Expect(g.name() == GroupName("world", size), "name " + g.name());

  // allreduce sum / avg, f32.
  Tensor t = Tensor::FromVector({5}, std::vector<float>(5, static_cast<float>(rank)));
  c.check.Ok(g.AllReduce(t, ReduceOp::kSum), "allreduce sum");
  c.check.Expect(Equal(t, std::vector<float>(5, sum_of_ranks)), "allreduce sum values");
  Tensor a = Tensor::FromVector({4}, std::vector<float>(4, 2.0f * (rank + 1)));
  c.check.Ok(g.AllReduce(a, ReduceOp::kAvg), "allreduce avg");
  c.check.Expect(Equal(a, std::vector<float>(4, static_cast<float>(size + 1))), "avg values");

  // f16 and bf16: reduced in f32, rounded once.
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    Tensor h = Tensor::Empty({3}, dtype);
    for (int i = 0; i < 3; ++i) {
      h.u16()[i] = dtype == DType::kF16 ? FloatToHalf(rank + 0.5f) : FloatToBFloat16(rank + 0.5f);
    }
    c.check.Ok(g.AllReduce(h, ReduceOp::kSum), absl::StrCat("allreduce ", DTypeName(dtype)));
    c.check.Expect(Equal(h, std::vector<float>(3, sum_of_ranks + 0.5f * size)),
                   absl::StrCat(DTypeName(dtype), " values"));
  }

  // Every rank gets the same bits even when the sum is inexact.
  Tensor inexact = Tensor::FromVector({64}, std::vector<float>(64, 0.1f * (rank + 1) + 1e-7f));
  c.check.Ok(g.AllReduce(inexact, ReduceOp::kSum), "inexact allreduce");
  Tensor gathered = Tensor::Empty({size, 64});
  c.check.Ok(g.AllGather(inexact, gathered), "allgather of the result");
  for (int r = 1; r < size; ++r) {
    c.check.Expect(std::memcmp(gathered.f32(), gathered.f32() + 64 * r, 64 * 4) == 0,
                   absl::StrCat("rank ", r, " got other bits than rank 0"));
  }

  // reduce-scatter: chunk j of rank r's input is 10 * r + j.
  const int chunk = 3;
  std::vector<float> in(size * chunk);
  for (int i = 0; i < size * chunk; ++i) in[i] = 10.0f * rank + i / chunk;
  Tensor rs_out = Tensor::Zeros({chunk});
  c.check.Ok(g.ReduceScatter(Tensor::FromVector({size * chunk}, in), rs_out, ReduceOp::kSum),
             "reduce_scatter");
  c.check.Expect(Equal(rs_out, std::vector<float>(chunk, 10.0f * sum_of_ranks + size * rank)),
                 "reduce_scatter values");
  Tensor rs_avg = Tensor::Zeros({chunk}, DType::kBF16);
  Tensor bf_in = Tensor::Zeros({size * chunk}, DType::kBF16);
  for (int i = 0; i < size * chunk; ++i) bf_in.u16()[i] = FloatToBFloat16(2.0f * (rank + 1));
  c.check.Ok(g.ReduceScatter(bf_in, rs_avg, ReduceOp::kAvg), "reduce_scatter avg bf16");
  c.check.Expect(Equal(rs_avg, std::vector<float>(chunk, static_cast<float>(size + 1))),
                 "reduce_scatter avg values");

  // all-gather of ints.
  Tensor ints = Tensor::FromInts({2}, {rank, -rank});
  Tensor all_ints = Tensor::Empty({size * 2}, DType::kI32);
  c.check.Ok(g.AllGather(ints, all_ints), "allgather");
  for (int r = 0; r < size; ++r) {
    c.check.Expect(all_ints.i32()[2 * r] == r && all_ints.i32()[2 * r + 1] == -r,
                   absl::StrCat("allgather chunk ", r));
  }

  // broadcast from every root.
  for (int root = 0; root < size; ++root) {
    Tensor b = Tensor::FromVector({7}, std::vector<float>(7, static_cast<float>(rank)));
    c.check.Ok(g.Broadcast(b, root), absl::StrCat("broadcast from ", root));
    c.check.Expect(Equal(b, std::vector<float>(7, static_cast<float>(root))),
                   absl::StrCat("broadcast values from ", root));
  }
  // Empty tensors are fine.
  Tensor empty = Tensor::Zeros({0});
  c.check.Ok(g.AllReduce(empty, ReduceOp::kSum), "empty allreduce");
  c.check.Ok(g.Barrier(), "barrier");
}

// Sends around the ring, before receiving, with tags out of order.
void PointToPoint(GlooRankContext& c) {
  ProcessGroup& g = c.group;
  const int size = g.size(), rank = c.rank;
  if (size == 1) return;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int tag : {1, 2, 3}) {
    Tensor t = Tensor::FromVector({2}, {static_cast<float>(rank), static_cast<float>(tag)});
    c.check.Ok(g.Send(t, next, tag), absl::StrCat("send tag ", tag));
    t.f32()[0] = -1;  // the send took a copy
  }
  for (int tag : {3, 1, 2}) {
    Tensor got = Tensor::Zeros({2});
    c.check.Ok(g.Recv(got, prev, tag), absl::StrCat("recv tag ", tag));
    c.check.Expect(Equal(got, {static_cast<float>(prev), static_cast<float>(tag)}),
                   absl::StrCat("recv values tag ", tag));
  }
  c.check.Ok(g.Barrier(), "barrier after point to point");
  c.check.Expect(c.group.pending_sends() == 0, "barrier completes pending sends");
}

void SubGroups(GlooRankContext& c) {
  ProcessGroup& g = c.group;
  const int rank = c.rank;
  auto first = g.NewGroup({0}, "first");  // a one-rank group
  if (!c.check.Ok(first.status(), "new_group first")) return;
  c.check.Expect((*first != nullptr) == (rank == 0), "membership of first");
  if (*first != nullptr) c.check.Ok((*first)->Barrier(), "one-rank barrier");
  if (g.size() < 3) return;
  auto upper = g.NewGroup({1, 2}, "pp");
  if (!c.check.Ok(upper.status(), "new_group pp")) return;
  c.check.Expect((*upper != nullptr) == (rank == 1 || rank == 2), "membership of pp");
  if (*upper != nullptr) {
    ProcessGroup& pp = **upper;
    c.check.Expect(pp.name() == "pp[2 ranks]" && pp.rank() == rank - 1 && pp.size() == 2,
                   "sub-group identity " + pp.name());
    Tensor t = Tensor::FromVector({1}, {static_cast<float>(rank)});
    c.check.Ok(pp.AllReduce(t, ReduceOp::kSum), "sub-group allreduce");
    c.check.Expect(t.f32()[0] == 3.0f, "sub-group sum");
    Tensor m = Tensor::FromVector({1}, {9.0f});
    if (pp.rank() == 0) {
      c.check.Ok(pp.Send(m, 1, 0), "sub-group send");
    } else {
      Tensor got = Tensor::Zeros({1});
      c.check.Ok(pp.Recv(got, 0, 0), "sub-group recv");
      c.check.Expect(got.f32()[0] == 9.0f, "sub-group recv value");
    }
    c.check.Ok(pp.Barrier(), "sub-group barrier");
  }
  c.check.Ok(g.Barrier(), "parent barrier after sub-groups");
}

class GlooSizeTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooSizeTest, EveryOperationComputesWhatItMust) {
  GlooTestOptions options;
  options.size = GetParam();
  options.key_prefix = absl::StrCat("every_op/", GetParam());
  options.check_calls = true;
  ExpectAllSucceeded(RunGlooRanks(options,
                                  [](GlooRankContext& c) {
                                    Collectives(c);
                                    PointToPoint(c);
                                    SubGroups(c);
                                  }),
                     options.size);
}

INSTANTIATE_TEST_SUITE_P(Sizes, GlooSizeTest, ::testing::Values(1, 2, 3, 4));

TEST(GlooProcessGroupTest, RecvOfTheWrongShapeIsInvalidArgumentAndBreaksBothSides) {
  GlooTestOptions options;
  options.size = 2;
  ExpectAllSucceeded(RunGlooRanks(options, [](GlooRankContext& c) {
    ProcessGroup& g = c.group;
    if (c.rank == 0) {
      c.check.Ok(g.Send(Tensor::Zeros({3}), 1, 4), "send");
      // Rank 1 breaks its group and closes its connections: delivering the
      // send fails without waiting for the timeout.
      c.check.IsError(g.Barrier(), absl::StatusCode::kUnavailable,
                      "barrier on world[2 ranks] rank 0: gloo:", "barrier after the bad send");
    } else {
      Tensor t = Tensor::Zeros({2});
      c.check.IsError(g.Recv(t, 0, 4), absl::StatusCode::kInvalidArgument,
                      "recv on world[2 ranks] rank 1: rank 0 sent f32[3] with tag 4, this rank "
                      "expects f32[2]",
                      "recv");
      c.check.IsError(g.Barrier(), absl::StatusCode::kAborted,
                      "the group is broken by an earlier error: recv on", "barrier");
    }
  }), 2);
}

TEST(GlooProcessGroupTest, CheckCallsTurnsDisagreeingRanksIntoInvalidArgument) {
  GlooTestOptions options;
  options.size = 2;
  options.check_calls = true;
  ExpectAllSucceeded(RunGlooRanks(options, [](GlooRankContext& c) {
    // Without check_calls these sizes make Gloo's I/O thread abort the process.
    Tensor t = Tensor::Zeros({c.rank == 0 ? 10 : 100000});
    c.check.IsError(c.group.AllReduce(t, ReduceOp::kSum), absl::StatusCode::kInvalidArgument,
                    absl::StrCat("allreduce on world[2 ranks] rank ", c.rank, ": ranks disagree: "
                                 "rank ", c.rank, " called allreduce f32[", t.numel(),
                                 "] sum, rank ", 1 - c.rank, " called allreduce f32[",
                                 c.rank == 0 ? 100000 : 10, "] sum"),
                    "mismatched allreduce");
    c.check.IsError(c.group.Barrier(), absl::StatusCode::kAborted, "broken", "barrier after");
  }), 2);
  ExpectAllSucceeded(RunGlooRanks(options, [](GlooRankContext& c) {
    Tensor t = Tensor::Zeros({4});
    absl::Status s = c.rank == 0 ? c.group.Broadcast(t, 1) : c.group.AllReduce(t, ReduceOp::kAvg);
    c.check.IsError(s, absl::StatusCode::kInvalidArgument,
                    c.rank == 0 ? "rank 0 called broadcast f32[4] from root 1, rank 1 called "
                                  "allreduce f32[4] avg"
                                : "rank 1 called allreduce f32[4] avg, rank 0 called broadcast "
                                  "f32[4] from root 1",
                    "different operations");
  }), 2);
}

TEST(GlooProcessGroupTest, LocalArgumentErrors) {
  GlooTestOptions options;
  options.size = 1;
  ExpectAllSucceeded(RunGlooRanks(options, [](GlooRankContext& c) {
    ProcessGroup& g = c.group;
    Tensor ints = Tensor::FromInts({2}, {1, 2});
    c.check.IsError(g.AllReduce(ints, ReduceOp::kSum), absl::StatusCode::kInvalidArgument,
                    "allreduce on world[1 rank] rank 0: the tensor has dtype i32", "i32 allreduce");
    c.check.IsError(g.Barrier(), absl::StatusCode::kAborted, "barrier on world[1 rank] rank 0",
                    "after an error");
  }), 1);
  ExpectAllSucceeded(RunGlooRanks(options, [](GlooRankContext& c) {
    c.check.IsError(c.group.Send(Tensor::Zeros({1}), 0, 0), absl::StatusCode::kInvalidArgument,
                    "destination 0 is this rank itself", "send to self");
  }), 1);
}

TEST(GlooProcessGroupTest, BuildsThroughAFileStore) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/gloo_file_store");
  ChildProcesses children(3, [&](int rank) {
    auto store = FileStore::Create(dir);
    if (!store.ok()) return 3;
    GlooOptions options;
    options.rank = rank;
    options.size = 3;
    options.timeout = absl::Seconds(20);
    options.name = "dp";
    auto group = GlooProcessGroup::Create(**store, options);
    if (!group.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, group.status().ToString().c_str());
      return 4;
    }
    Tensor t = Tensor::FromVector({2}, {1.0f, static_cast<float>(rank)});
    if (!(*group)->AllReduce(t, ReduceOp::kSum).ok() || t.f32()[0] != 3 || t.f32()[1] != 3) return 5;
    return (*group)->Barrier().ok() ? 0 : 6;
  });
  ExpectAllSucceeded(children.WaitAll(absl::Seconds(60)), 3);
}

TEST(GlooProcessGroupTest, RendezvousDeadlineNamesTheMissingRank) {
  auto store = FileStore::Create(absl::StrCat(std::getenv("TEST_TMPDIR"), "/gloo_lonely"));
  ASSERT_TRUE(store.ok());
  GlooOptions options;
  options.rank = 0;
  options.size = 2;
  options.timeout = absl::Milliseconds(300);
  options.key_prefix = "job/1/gen/0";
  auto group = GlooProcessGroup::Create(**store, options);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded) << group.status();
  EXPECT_THAT(group.status().message(),
              HasSubstr("rendezvous of world[2 ranks] rank 0 under 'job/1/gen/0': file store"));
  EXPECT_THAT(group.status().message(), HasSubstr("key 'job/1/gen/0/1' was not set within 300ms"));
}

TEST(GlooProcessGroupTest, BadOptionsAreInvalidArgument) {
  auto store = FileStore::Create(absl::StrCat(std::getenv("TEST_TMPDIR"), "/gloo_bad"));
  ASSERT_TRUE(store.ok());
  GlooOptions options;
  options.rank = 2;
  options.size = 2;
  EXPECT_EQ(GlooProcessGroup::Create(**store, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.rank = 0;
  options.hostname = "no-such-host.invalid";
  auto group = GlooProcessGroup::Create(**store, options);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument) << group.status();
  EXPECT_THAT(group.status().message(), HasSubstr("no TCP device for hostname 'no-such-host.invalid'"));
}

}  // namespace
}  // namespace ringmaster::engine::dist
