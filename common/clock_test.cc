#include "common/clock.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace ringmaster {
namespace {

TEST(FakeClockTest, AdvanceMovesNowExactly) {
  FakeClock clock;
  absl::Time t0 = clock.Now();
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now() - t0, absl::Seconds(3));
}

TEST(FakeClockTest, DeadlineExpiresOnlyWhenTimeIsAdvanced) {
  FakeClock clock;
  Deadline deadline(&clock, absl::Seconds(10));
  EXPECT_FALSE(deadline.Expired());
  EXPECT_EQ(deadline.Remaining(), absl::Seconds(10));
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(deadline.Expired());
  EXPECT_EQ(deadline.Remaining(), absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(deadline.Expired());
  EXPECT_EQ(deadline.Remaining(), absl::ZeroDuration());
}

// A waiter with a 30 s timeout, driven to its timeout by the fake clock: the
// test finishes in milliseconds of real time, and the waiter wakes only after
// the full 30 fake seconds.
TEST(FakeClockTest, DrivesATimeoutWithoutSleeping) {
  FakeClock clock;
  std::atomic<bool> woke{false};
  absl::Time start = clock.Now();
  std::thread waiter([&] {
    clock.SleepFor(absl::Seconds(30));
    woke = true;
  });
  // Wait (in real time, bounded) until the waiter is parked in SleepUntil.
  for (int i = 0; i < 10000 && clock.Sleepers() == 0; ++i) std::this_thread::yield();
  ASSERT_EQ(clock.Sleepers(), 1);
  clock.Advance(absl::Seconds(29));
  for (int i = 0; i < 1000; ++i) std::this_thread::yield();
  EXPECT_FALSE(woke.load()) << "woke before its 30 s deadline";
  clock.Advance(absl::Seconds(1));
  waiter.join();
  EXPECT_TRUE(woke.load());
  EXPECT_EQ(clock.Now() - start, absl::Seconds(30));
}

TEST(RealClockTest, NowIsMonotoneEnough) {
  absl::Time a = Clock::Real()->Now();
  absl::Time b = Clock::Real()->Now();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace ringmaster
