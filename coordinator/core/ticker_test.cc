#include "coordinator/core/ticker.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

// Calls of `tick` and `on_poke`, and a wait for them (bounded).
class Counts {
 public:
  void Tick() { Add(&ticks_); }
  void Pass() { Add(&passes_); }
  int ticks() const { return ticks_.load(); }
  int passes() const { return passes_.load(); }
  // True once `ready()` holds, false after 10 s.
  template <typename Ready>
  bool WaitFor(Ready ready) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), ready);
  }

 private:
  void Add(std::atomic<int>* n) {
    std::lock_guard<std::mutex> lock(mu_);
    ++*n;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> ticks_{0};
  std::atomic<int> passes_{0};
};

TEST(TickerTest, APokeRunsOnPokeAndNeverTheTick) {
  Counts counts;
  Ticker ticker(absl::Hours(1), [&] { counts.Tick(); }, [&] { counts.Pass(); });
  ticker.Start();
  ASSERT_TRUE(counts.WaitFor([&] { return counts.ticks() == 1; })) << "no tick at Start";
  for (int i = 0; i < 1000; ++i) ticker.Poke();
  ASSERT_TRUE(counts.WaitFor([&] { return counts.passes() >= 1; })) << "no pass after the pokes";
  const int passes = counts.passes();
  ticker.Poke();
  ASSERT_TRUE(counts.WaitFor([&] { return counts.passes() > passes; })) << "no pass after a later poke";
  ticker.Stop();
  EXPECT_EQ(counts.ticks(), 1);
  EXPECT_EQ(ticker.ticks(), 1);
  EXPECT_EQ(ticker.poked_passes(), counts.passes());
}

TEST(TickerTest, PokesWhileAPassRunsCauseOneMorePass) {
  Counts counts;
  std::mutex gate;
  std::unique_lock<std::mutex> closed(gate);
  Ticker ticker(absl::Hours(1), [&] { counts.Tick(); }, [&] {
    counts.Pass();
    std::lock_guard<std::mutex> wait(gate);
  });
  ticker.Start();
  ASSERT_TRUE(counts.WaitFor([&] { return counts.ticks() == 1; }));
  ticker.Poke();
  ASSERT_TRUE(counts.WaitFor([&] { return counts.passes() == 1; }));
  for (int i = 0; i < 100; ++i) ticker.Poke();  // while the first pass waits at the gate
  closed.unlock();
  ASSERT_TRUE(counts.WaitFor([&] { return counts.passes() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // room for a wrong third pass
  ticker.Stop();
  EXPECT_EQ(counts.passes(), 2);
}

// Lost nodes are found by the tick: a stream of pokes (a registration burst)
// must not hold it back.
TEST(TickerTest, TicksGoOnDuringAStreamOfPokes) {
  Counts counts;
  Ticker ticker(absl::Milliseconds(20), [&] { counts.Tick(); }, [&] { counts.Pass(); });
  std::atomic<bool> stop{false};
  ticker.Start();
  std::thread poker([&] {
    while (!stop.load()) ticker.Poke();
  });
  const bool ticked = counts.WaitFor([&] { return counts.ticks() >= 5 && counts.passes() >= 5; });
  stop = true;
  poker.join();
  ticker.Stop();
  EXPECT_TRUE(ticked) << counts.ticks() << " tick(s) and " << counts.passes() << " pass(es) in 10 s of pokes";
}

TEST(TickerTest, StopWithoutStartAndTwice) {
  Counts counts;
  Ticker ticker(absl::Milliseconds(1), [&] { counts.Tick(); }, [&] { counts.Pass(); });
  ticker.Stop();
  ticker.Start();  // after Stop: no thread
  ticker.Stop();
  EXPECT_EQ(counts.ticks(), 0);
}

}  // namespace
}  // namespace ringmaster::coordinator
