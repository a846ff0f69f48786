// GlooProcessGroup under failure, across real processes: a rank SIGKILLed in
// the middle of collectives, a rank that stays alive but never joins. The
// survivors must return the contract's errors within the timeout (plus
// slack), never hang, and be ABORTED afterwards. Also prints (does not
// assert) the 25 MB allreduce time on loopback.

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/core/tensor.h"
#include "engine/dist/gloo_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::dist {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr absl::Duration kSlack = absl::Seconds(3);

// What a surviving rank reports through the store: "<code> <message>".
std::string Report(const absl::Status& status) {
  return absl::StrCat(static_cast<int>(status.code()), " ", status.message());
}

TEST(GlooFailureTest, KillingOneOfFourRanksMidCollectiveFailsTheOthersWithinTheTimeout) {
  GlooTestOptions options;
  options.size = 4;
  options.timeout = absl::Seconds(3);
  options.key_prefix = "kill";
  constexpr int kVictim = 3;
  absl::Time killed_at;
  absl::Duration survivors_done;
  std::vector<std::string> reports(options.size);

  std::vector<ChildExit> exits = RunGlooRanks(
      options,
      [&](GlooRankContext& c) {
        // 4 MB per allreduce: each takes milliseconds, so the kill lands in one.
        Tensor t = Tensor::Zeros({1 << 20});
        absl::Status status;
        for (int i = 0; i < 100000 && status.ok(); ++i) {
          status = c.group.AllReduce(t, ReduceOp::kSum);
          if (i == 2) c.check.Ok(c.store.Set(absl::StrCat("running/", c.rank), "1"), "report");
        }
        c.check.Ok(c.store.Set(absl::StrCat("result/", c.rank), Report(status)), "result");
        c.check.IsError(c.group.Barrier(), absl::StatusCode::kAborted,
                        "the group is broken by an earlier error: allreduce on world[4 ranks]",
                        "after the failure");
      },
      [&](ChildProcesses& children, Store& store) {
        std::vector<std::string> running;
        for (int r = 0; r < options.size; ++r) running.push_back(absl::StrCat("running/", r));
        ASSERT_TRUE(store.Wait(running, absl::Seconds(60)).ok());
        children.Kill(kVictim, SIGKILL);
        killed_at = absl::Now();
        for (int r = 0; r < options.size; ++r) {
          if (r == kVictim) continue;
          auto report = store.Get(absl::StrCat("result/", r), options.timeout + kSlack);
          ASSERT_TRUE(report.ok()) << "rank " << r << " did not fail in time: " << report.status();
          reports[r] = *report;
        }
        survivors_done = absl::Now() - killed_at;
      });

  ASSERT_EQ(exits.size(), 4u);
  EXPECT_EQ(exits[kVictim].signal, SIGKILL) << exits[kVictim].Describe();
  std::printf("survivors failed %s after the SIGKILL (timeout %s)\n",
              absl::FormatDuration(survivors_done).c_str(),
              absl::FormatDuration(options.timeout).c_str());
  EXPECT_LT(survivors_done, options.timeout + kSlack);
  for (int r = 0; r < options.size; ++r) {
    if (r == kVictim) continue;
    EXPECT_TRUE(exits[r].Succeeded()) << "rank " << r << ": " << exits[r].Describe();
    std::vector<std::string> parts = absl::StrSplit(reports[r], absl::MaxSplits(' ', 1));
    ASSERT_EQ(parts.size(), 2u) << reports[r];
    int code = 0;
    ASSERT_TRUE(absl::SimpleAtoi(parts[0], &code));
    std::printf("rank %d: %s: %s\n", r,
                absl::StatusCodeToString(static_cast<absl::StatusCode>(code)).c_str(),
                parts[1].c_str());
    // Lost connection (a neighbour of the victim, or of a rank that gave up)
    // or, for a rank waiting on a live peer, its timeout.
    EXPECT_THAT(static_cast<absl::StatusCode>(code),
                AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded))
        << reports[r];
    EXPECT_THAT(parts[1], HasSubstr(absl::StrCat("allreduce on world[4 ranks] rank ", r, ": gloo:")));
  }
}

TEST(GlooFailureTest, ARankThatNeverJoinsGivesDeadlineExceededWithinTheTimeout) {
  GlooTestOptions options;
  options.size = 2;
  options.timeout = absl::Milliseconds(500);
  options.key_prefix = "silent";
  std::vector<ChildExit> exits = RunGlooRanks(options, [&](GlooRankContext& c) {
    if (c.rank == 1) {
      // Alive and connected, but it never calls the collective: it waits for
      // rank 0 to be done, then leaves.
      c.check.Ok(c.store.Wait({"rank0/done"}, absl::Seconds(60)), "wait for rank 0");
      return;
    }
    Tensor t = Tensor::Zeros({16});
    absl::Time start = absl::Now();
    absl::Status status = c.group.AllReduce(t, ReduceOp::kSum);
    absl::Duration elapsed = absl::Now() - start;
    c.check.IsError(status, absl::StatusCode::kDeadlineExceeded,
                    "allreduce on world[2 ranks] rank 0: gloo:", "allreduce with a silent peer");
    c.check.Expect(elapsed >= options.timeout && elapsed < options.timeout + kSlack,
                   absl::StrCat("failed after ", absl::FormatDuration(elapsed)));
    c.check.IsError(c.group.Broadcast(t, 0), absl::StatusCode::kAborted,
                    "broadcast on world[2 ranks] rank 0: the group is broken", "next call");
    c.check.Ok(c.store.Set("rank0/done", "1"), "done");
  });
  ASSERT_EQ(exits.size(), 2u);
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(exits[r].Succeeded()) << r << ": " << exits[r].Describe();
}

// Not a test of speed: prints the time of a 25 MB (the default bucket size)
// f32 allreduce on loopback for 2 and 4 ranks.
TEST(GlooFailureTest, PrintsTheTimeOfA25MBAllReduce) {
  for (int size : {2, 4}) {
    GlooTestOptions options;
    options.size = size;
    options.timeout = absl::Seconds(60);
    options.limit = absl::Seconds(240);
    options.key_prefix = absl::StrCat("bench/", size);
    std::vector<ChildExit> exits = RunGlooRanks(options, [&](GlooRankContext& c) {
      constexpr int64_t kElements = 25 * (1 << 20) / 4;
      constexpr int kIterations = 5;
      Tensor t = Tensor::Zeros({kElements});
      c.check.Ok(c.group.AllReduce(t, ReduceOp::kSum), "warm-up");
      std::vector<double> ms;
      for (int i = 0; i < kIterations; ++i) {
        c.check.Ok(c.group.Barrier(), "barrier");
        absl::Time start = absl::Now();
        c.check.Ok(c.group.AllReduce(t, ReduceOp::kSum), "allreduce");
        ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      }
      if (c.rank != 0) return;
      std::sort(ms.begin(), ms.end());
      const double bytes = kElements * 4.0, median = ms[kIterations / 2];
      // Ring allreduce bus bandwidth: 2 (n - 1) / n of the buffer per rank.
      const double bus_gbps = bytes * 2 * (size - 1) / size / (median / 1e3) / 1e9;
      std::printf("gloo allreduce 25 MB f32, %d ranks on loopback: median %.1f ms, min %.1f ms, "
                  "max %.1f ms over %d runs; bus bandwidth %.2f GB/s\n",
                  size, median, ms.front(), ms.back(), kIterations, bus_gbps);
      std::fflush(stdout);
    });
    for (int r = 0; r < size; ++r) EXPECT_TRUE(exits[r].Succeeded()) << r << ": " << exits[r].Describe();
  }
}

}  // namespace
}  // namespace ringmaster::engine::dist
