#ifndef RINGMASTER_BENCH_WATCHDOG_H_
#define RINGMASTER_BENCH_WATCHDOG_H_

// The last guard of a benchmark against a wait without a bound.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

namespace ringmaster::bench {

// Ends the process (exit 1) unless it is destroyed within `bound`: prints
// TIMEOUT with `describe()` (where the run is), kills the coordinator the
// run started (`pid`, else 0) and removes its directory (`dir`, unless empty).
class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds bound, std::function<std::string()> describe, pid_t pid, std::string dir)
      : thread_([this, bound, describe = std::move(describe), pid, dir = std::move(dir)] {
          std::unique_lock<std::mutex> lock(mu_);
          if (cv_.wait_for(lock, bound, [&] { return disarmed_; })) return;
          std::printf("TIMEOUT: the run is still going after %.0f s, in %s\n",
                      std::chrono::duration<double>(bound).count(), describe().c_str());
          std::fflush(stdout);
          if (pid > 0) ::kill(pid, SIGKILL);
          std::error_code ec;
          if (!dir.empty()) std::filesystem::remove_all(dir, ec);
          std::_Exit(1);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      disarmed_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace ringmaster::bench

#endif  // RINGMASTER_BENCH_WATCHDOG_H_
