#ifndef RINGMASTER_COORDINATOR_TICKER_H_
#define RINGMASTER_COORDINATOR_TICKER_H_

// Ticker: one thread that calls `tick` every `interval` (real time, the
// first at Start), and `on_poke` soon after Poke() (a job was submitted, a
// node registered, a rank exited: schedule now rather than at the next
// tick).
//
// A poke never runs `tick` and never moves the next tick: during a burst of
// thousands of registrations, each of which pokes, `tick` (every node's
// lease, every drain, every session: O(nodes)) would otherwise run back to
// back and hold the locks the registrations and heartbeats wait for, while
// `on_poke` (a scheduling pass) costs nothing when no job waits. Pokes that
// arrive while `on_poke` or `tick` runs cause one more `on_poke`, not one per
// poke; pokes made before a tick starts are served by it (a tick schedules
// too).
//
// Thread-safe. Stop() (and the destructor) joins the thread.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/time/time.h"

namespace ringmaster::coordinator {

class Ticker {
 public:
  Ticker(absl::Duration interval, std::function<void()> tick, std::function<void()> on_poke);
  ~Ticker();
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

  void Start();
  void Poke();
  // Idempotent.
  void Stop();

  // Calls of `tick` and of `on_poke` so far.
  int64_t ticks() const;
  int64_t poked_passes() const;

 private:
  void Loop();

  const absl::Duration interval_;
  const std::function<void()> tick_;
  const std::function<void()> on_poke_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool poked_ = false;
  bool stopping_ = false;
  int64_t ticks_ = 0;
  int64_t poked_passes_ = 0;
  std::thread thread_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_TICKER_H_
