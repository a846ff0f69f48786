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

// WaitUntil ends on its condition, notified, or when the fake time reaches
// its deadline: never because real time passed.
TEST(FakeClockTest, WaitUntilEndsOnTheFakeDeadlineOrTheCondition) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::atomic<int> result{-1};
  const absl::Time deadline = clock.Now() + absl::Seconds(30);
  std::thread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    result = clock.WaitUntil(lock, cv, deadline, [&] { return ready; }) ? 1 : 0;
  });
  ASSERT_TRUE(clock.AwaitSleepers(1));
  clock.Advance(absl::Seconds(29));
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(result.load(), -1) << "ended before its 30 s deadline";
  clock.Advance(absl::Seconds(1));
  waiter.join();
  EXPECT_EQ(result.load(), 0);

  std::thread notified([&] {
    std::unique_lock<std::mutex> lock(mu);
    result = clock.WaitUntil(lock, cv, absl::InfiniteFuture(), [&] { return ready; }) ? 1 : 0;
  });
  ASSERT_TRUE(clock.AwaitSleepers(1));
  {
    std::lock_guard<std::mutex> lock(mu);
    ready = true;
  }
  cv.notify_all();
  notified.join();
  EXPECT_EQ(result.load(), 1);
}

TEST(RealClockTest, WaitUntilTimesOutInRealTime) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(Clock::Real()->WaitUntil(lock, cv, start + absl::Milliseconds(20), [] { return false; }));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
}

TEST(RealClockTest, NowIsMonotoneEnough) {
  absl::Time a = Clock::Real()->Now();
  absl::Time b = Clock::Real()->Now();
  EXPECT_LE(a, b);
}

}  // namespace
}  // namespace ringmaster
