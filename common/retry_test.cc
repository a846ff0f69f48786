#include "common/retry.h"

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

RetryPolicy NoJitter(absl::Duration initial, absl::Duration max) {
  RetryPolicy policy;
  policy.initial = initial;
  policy.max = max;
  policy.multiplier = 2;
  policy.jitter = 0;
  return policy;
}

TEST(RetryTest, GrowsExponentiallyUpToTheCapAndResets) {
  FakeClock clock;
  Retry retry(&clock, NoJitter(absl::Milliseconds(100), absl::Milliseconds(700)), 1);
  EXPECT_EQ(retry.NextDelay(), absl::Milliseconds(100));
  EXPECT_EQ(retry.NextDelay(), absl::Milliseconds(200));
  EXPECT_EQ(retry.NextDelay(), absl::Milliseconds(400));
  EXPECT_EQ(retry.NextDelay(), absl::Milliseconds(700));
  EXPECT_EQ(retry.NextDelay(), absl::Milliseconds(700));
  retry.Reset();
  EXPECT_EQ(retry.NextDelay(), absl::Milliseconds(100));
}

TEST(RetryTest, JitterSpreadsDelaysWithinItsBoundsAndNeverPastTheCap) {
  FakeClock clock;
  RetryPolicy policy;
  policy.initial = absl::Seconds(1);
  policy.max = absl::Seconds(1);
  policy.jitter = 0.2;
  Retry retry(&clock, policy, 42);
  absl::Duration low = absl::InfiniteDuration(), high = absl::ZeroDuration();
  for (int i = 0; i < 1000; ++i) {
    absl::Duration d = *retry.NextDelay();
    low = std::min(low, d);
    high = std::max(high, d);
  }
  EXPECT_GE(low, absl::Milliseconds(800));
  EXPECT_LT(low, absl::Milliseconds(850));
  EXPECT_LE(high, absl::Seconds(1));
  EXPECT_GT(high, absl::Milliseconds(950));
}

TEST(RetryTest, TwoClientsDoNotRetryInLockstep) {
  FakeClock clock;
  Retry a(&clock, RetryPolicy{}, 1), b(&clock, RetryPolicy{}, 2);
  int same = 0;
  for (int i = 0; i < 10; ++i) same += a.NextDelay() == b.NextDelay() ? 1 : 0;
  EXPECT_LT(same, 10);
}

// The deadline is counted on the injected clock: no delay is handed out that
// would end at or past it, and a Reset starts it again.
TEST(RetryTest, GivesUpWhenTheNextDelayWouldReachTheDeadline) {
  FakeClock clock;
  RetryPolicy policy = NoJitter(absl::Seconds(1), absl::Seconds(4));
  policy.deadline = absl::Seconds(10);
  Retry retry(&clock, policy, 1);
  EXPECT_EQ(retry.give_up_at(), clock.Now() + absl::Seconds(10));
  EXPECT_EQ(retry.NextDelay(), absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(retry.NextDelay(), absl::Seconds(2));
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(retry.NextDelay(), absl::Seconds(4));
  clock.Advance(absl::Seconds(4));
  // 7 s gone: 4 more would end at the 10 s deadline.
  EXPECT_EQ(retry.NextDelay(), std::nullopt);
  retry.Reset();
  EXPECT_EQ(retry.give_up_at(), clock.Now() + absl::Seconds(10));
  EXPECT_EQ(retry.NextDelay(), absl::Seconds(1));
}

TEST(RetryTest, WithoutADeadlineNeverGivesUp) {
  FakeClock clock;
  Retry retry(&clock, NoJitter(absl::Seconds(1), absl::Seconds(1)), 1);
  EXPECT_EQ(retry.give_up_at(), absl::InfiniteFuture());
  clock.Advance(absl::Hours(24 * 365));
  EXPECT_EQ(retry.NextDelay(), absl::Seconds(1));
}

}  // namespace
}  // namespace ringmaster
