#include "coordinator/core/executor.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

TEST(ExecutorTest, RunsPostedTasksAndGrowsUpToTheCap) {
  Executor executor({"test", 3, false});
  std::mutex mu;
  std::condition_variable cv;
  int running = 0, done = 0;
  bool release = false;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(executor.Post([&] {
      std::unique_lock<std::mutex> lock(mu);
      ++running;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
      ++done;
    }));
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return running == 3; }));
  }
  EXPECT_EQ(executor.threads(), 3u);  // the other two wait in the queue
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    cv.notify_all();
  }
  executor.Shutdown();
  EXPECT_EQ(done, 5);
  EXPECT_FALSE(executor.Post([] {}));
}

TEST(ExecutorTest, RejectsWhenBusyIfAsked) {
  Executor executor({"waits", 1, true});
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, release = false;
  ASSERT_TRUE(executor.Post([&] {
    std::unique_lock<std::mutex> lock(mu);
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  }));
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return started; }));
  }
  EXPECT_FALSE(executor.Post([] {}));  // its one thread is busy
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
    cv.notify_all();
  }
  executor.Shutdown();
}

TEST(ExecutorTest, DelayedTasksRunInOrderOfTheirTimeAndAtShutdown) {
  Executor executor({"timers", 2, false});
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> count{0};
  ASSERT_TRUE(executor.PostAfter(absl::Milliseconds(60), [&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(2);
    ++count;
  }));
  ASSERT_TRUE(executor.PostAfter(absl::Milliseconds(10), [&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(1);
    ++count;
  }));
  ASSERT_TRUE(executor.PostAfter(absl::Hours(1), [&] { ++count; }));  // runs at Shutdown
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (count.load() < 2 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(order, (std::vector<int>{1, 2}));
  }
  executor.Shutdown();
  EXPECT_EQ(count.load(), 3);
}

}  // namespace
}  // namespace ringmaster::coordinator
