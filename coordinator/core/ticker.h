#ifndef RINGMASTER_COORDINATOR_TICKER_H_
#define RINGMASTER_COORDINATOR_TICKER_H_

// Ticker: one thread that calls `tick` every `interval` (real time), and at
// once when Poke() is called (a job was submitted, a node registered, a rank
// exited: schedule now rather than at the next tick). Pokes that arrive
// while a tick runs cause one more tick, not one per poke.
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
  Ticker(absl::Duration interval, std::function<void()> tick);
  ~Ticker();
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

  void Start();
  void Poke();
  // Idempotent.
  void Stop();

  int64_t ticks() const;

 private:
  void Loop();

  const absl::Duration interval_;
  const std::function<void()> tick_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool poked_ = false;
  bool stopping_ = false;
  int64_t ticks_ = 0;
  std::thread thread_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_TICKER_H_
