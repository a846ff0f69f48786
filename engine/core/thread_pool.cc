#include "engine/core/thread_pool.h"

#include <algorithm>

namespace ringmaster::engine {
namespace {

thread_local bool t_inside_pool = false;

int ResolveThreads(int n) {
  if (n > 0) return n;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(ResolveThreads(num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::NumChunks(int64_t n, int64_t grain) const {
  if (n <= 0) return 0;
  grain = std::max<int64_t>(grain, 1);
  int64_t by_grain = (n + grain - 1) / grain;
  return static_cast<int>(std::min<int64_t>(num_threads_, by_grain));
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  ParallelForChunks(n, grain, [&fn](int, int64_t begin, int64_t end) { fn(begin, end); });
}

void ThreadPool::ParallelForChunks(int64_t n, int64_t grain, const ChunkFn& fn) {
  const int chunks = NumChunks(n, grain);
  if (chunks == 0) return;
  auto bounds = [n, chunks](int c) { return n * c / chunks; };
  if (chunks == 1 || t_inside_pool) {
    // Same chunk boundaries as the parallel path, so results do not depend on nesting.
    for (int c = 0; c < chunks; ++c) fn(c, bounds(c), bounds(c + 1));
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    next_chunk_.store(0);
    ++generation_;
  }
  work_cv_.notify_all();
  t_inside_pool = true;
  RunChunks(&fn, n, chunks);
  t_inside_pool = false;
  // Wait until every worker has left RunChunks (and so no longer touches job_).
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return active_workers_ == 0 && next_chunk_.load() >= job_chunks_; });
  job_ = nullptr;
}

void ThreadPool::RunChunks(const ChunkFn* job, int64_t n, int chunks) {
  for (;;) {
    int c = next_chunk_.fetch_add(1);
    if (c >= chunks) return;
    (*job)(c, n * c / chunks, n * (c + 1) / chunks);
  }
}

void ThreadPool::WorkerLoop() {
  t_inside_pool = true;
  uint64_t seen = 0;
  for (;;) {
    const ChunkFn* job;
    int64_t n;
    int chunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      // A worker that wakes after the job has finished must not join it: the
      // caller only waits for workers registered while job_ was set.
      if (job_ == nullptr) continue;
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
      ++active_workers_;
    }
    RunChunks(job, n, chunks);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --active_workers_;
    }
    done_cv_.notify_one();
  }
}

}  // namespace ringmaster::engine
