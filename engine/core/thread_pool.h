#ifndef RINGMASTER_ENGINE_CORE_THREAD_POOL_H_
#define RINGMASTER_ENGINE_CORE_THREAD_POOL_H_

// A fixed pool of threads for data-parallel loops in the CPU backend.
//
// ParallelFor(n, grain, fn) splits [0, n) into NumChunks(n, grain) contiguous
// chunks whose boundaries depend only on (n, grain, num_threads), never on
// timing: chunk c is [c * n / k, (c + 1) * n / k). Which thread runs a chunk
// may vary, so a kernel that keeps per-chunk partial results (indexed by the
// chunk number) and combines them in chunk order is bitwise reproducible for
// the same thread count. The calling thread runs chunks too.
//
// Thread-safe: calls from several threads are serialised; a ParallelFor called
// from inside a chunk (nested) runs inline on the calling thread.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ringmaster::engine {

class ThreadPool {
 public:
  // fn(chunk, begin, end) for one chunk [begin, end) of [0, n).
  using ChunkFn = std::function<void(int chunk, int64_t begin, int64_t end)>;

  // num_threads <= 0 means std::thread::hardware_concurrency(). The pool runs
  // num_threads - 1 workers; the caller of ParallelFor is the last one.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Number of chunks ParallelFor uses: min(num_threads, ceil(n / grain)), >= 1
  // for n > 0, 0 for n <= 0. grain <= 0 is treated as 1.
  int NumChunks(int64_t n, int64_t grain) const;

  // Runs fn over [0, n); returns when every chunk is done.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  // As ParallelFor, telling fn its chunk number (0 .. NumChunks - 1).
  void ParallelForChunks(int64_t n, int64_t grain, const ChunkFn& fn);

 private:
  void WorkerLoop();
  void RunChunks(const ChunkFn* job, int64_t n, int chunks);

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one ParallelFor at a time

  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // guarded by mutex_
  bool stop_ = false;        // guarded by mutex_
  int active_workers_ = 0;   // workers inside RunChunks; guarded by mutex_

  // The current job (valid while a ParallelFor is running).
  const ChunkFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  std::atomic<int> next_chunk_{0};
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_THREAD_POOL_H_
