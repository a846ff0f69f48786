#include "engine/core/thread_pool.h"

#include <atomic>
#include <mutex>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPoolTest, ChunkBoundariesAreFixedAndContiguous) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.NumChunks(0, 1), 0);
  EXPECT_EQ(pool.NumChunks(10, 100), 1);
  EXPECT_EQ(pool.NumChunks(10, 3), 4);
  EXPECT_EQ(pool.NumChunks(10, 5), 2);
  for (int run = 0; run < 20; ++run) {
    std::mutex mu;
    std::set<std::tuple<int, int64_t, int64_t>> seen;
    pool.ParallelForChunks(10, 1, [&](int c, int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(mu);
      seen.insert({c, b, e});
    });
    std::set<std::tuple<int, int64_t, int64_t>> expected = {{0, 0, 2}, {1, 2, 5}, {2, 5, 7}, {3, 7, 10}};
    EXPECT_EQ(seen, expected);
  }
}

TEST(ThreadPoolTest, UsesSeveralThreads) {
  ThreadPool pool(2);
  std::mutex mu;
  std::set<std::thread::id> ids;
  for (int run = 0; run < 50 && ids.size() < 2; ++run) {
    pool.ParallelFor(2, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
  }
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(4, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.ParallelFor(100, 1, [&](int64_t b2, int64_t e2) { total.fetch_add(e2 - b2); });
  });
  EXPECT_EQ(total.load(), 400);
}

TEST(ThreadPoolTest, ManyQuickJobsDoNotLoseWork) {
  ThreadPool pool(2);
  int64_t sum = 0;
  for (int job = 0; job < 2000; ++job) {
    std::vector<int64_t> part(2, 0);
    pool.ParallelForChunks(2, 1, [&](int c, int64_t b, int64_t e) { part[c] = e - b; });
    sum += part[0] + part[1];
  }
  EXPECT_EQ(sum, 4000);
}

TEST(ThreadPoolTest, DefaultSizeIsHardwareConcurrency) {
  ThreadPool pool(0);
  unsigned hw = std::thread::hardware_concurrency();
  EXPECT_EQ(pool.num_threads(), hw == 0 ? 1 : static_cast<int>(hw));
}

}  // namespace
}  // namespace ringmaster::engine
