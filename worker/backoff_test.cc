#include "worker/backoff.h"

#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

TEST(BackoffTest, GrowsExponentiallyUpToTheCap) {
  BackoffOptions options;
  options.initial = absl::Milliseconds(100);
  options.max = absl::Milliseconds(700);
  options.multiplier = 2;
  options.jitter = 0;
  Backoff backoff(options, 1);
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(100));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(200));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(400));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(700));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(700));
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, JitterSpreadsDelaysWithinItsBoundsAndNeverPastTheCap) {
  BackoffOptions options;
  options.initial = absl::Seconds(1);
  options.max = absl::Seconds(1);
  options.jitter = 0.2;
  Backoff backoff(options, 42);
  absl::Duration low = absl::InfiniteDuration(), high = absl::ZeroDuration();
  for (int i = 0; i < 1000; ++i) {
    absl::Duration d = backoff.Next();
    low = std::min(low, d);
    high = std::max(high, d);
  }
  EXPECT_GE(low, absl::Milliseconds(800));
  EXPECT_LT(low, absl::Milliseconds(850));
  EXPECT_LE(high, absl::Seconds(1));
}

TEST(BackoffTest, TwoWorkersDoNotRetryInLockstep) {
  BackoffOptions options;
  Backoff a(options, 1), b(options, 2);
  int same = 0;
  for (int i = 0; i < 10; ++i) same += a.Next() == b.Next() ? 1 : 0;
  EXPECT_LT(same, 10);
}

}  // namespace
}  // namespace ringmaster::worker
