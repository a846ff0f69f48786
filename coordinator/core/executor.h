#ifndef RINGMASTER_COORDINATOR_EXECUTOR_H_
#define RINGMASTER_COORDINATOR_EXECUTOR_H_

// Executor: a pool of threads that runs posted tasks, so that the gRPC
// adapters never block a reactor (or a gRPC thread) on a lock or on I/O: a
// reactor posts the work to the core here and continues when the task hands
// the result back.
//
// Threads are started on demand, up to max_threads: a task posted while every
// thread is busy starts a new one (below the cap) or waits in the queue.
// With `reject_when_busy`, a task that finds every one of max_threads busy
// is refused instead (Post returns false): for blocking calls that would
// otherwise wait behind each other (rendezvous waits).
//
// PostAfter runs a task once `delay` has passed (real time: these are
// timers of streams, not of the coordinator's logic, which uses the injected
// clock).
//
// Shutdown() refuses new tasks, runs every task still queued (delayed ones at
// once), and joins the threads. Tasks must therefore never wait for another
// task to be posted later.
//
// Thread-safe.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster::coordinator {

struct ExecutorOptions {
  std::string name = "executor";  // of the threads (first 15 characters)
  size_t max_threads = 4;
  // Refuse a task when max_threads are all busy instead of queueing it.
  bool reject_when_busy = false;
};

class Executor {
 public:
  explicit Executor(ExecutorOptions options);
  ~Executor();  // Shutdown()
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues `task`; false when shut down (or busy, with reject_when_busy):
  // the task was not taken and will not run.
  bool Post(std::function<void()> task);
  // Runs `task` after `delay` (at once if not positive); false when shut down.
  bool PostAfter(absl::Duration delay, std::function<void()> task);

  // See the class comment. Idempotent.
  void Shutdown();

  // Threads started so far / running a task now.
  size_t threads() const;
  size_t busy() const;

 private:
  void Loop();
  // Starts a thread if none is idle and the cap allows; caller holds mu_.
  void MaybeGrowLocked();

  const ExecutorOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::multimap<absl::Time, std::function<void()>> delayed_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  size_t busy_ = 0;
  bool stopping_ = false;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_EXECUTOR_H_
