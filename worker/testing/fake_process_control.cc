#include "worker/testing/fake_process_control.h"

#include <signal.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringmaster::worker {
namespace {

std::string EnvValue(const SpawnRequest& request, const std::string& key) {
  const std::string prefix = key + "=";
  for (const std::string& kv : request.env) {
    if (kv.rfind(prefix, 0) == 0) return kv.substr(prefix.size());
  }
  return "";
}

}  // namespace

absl::StatusOr<int64_t> FakeProcessControl::Spawn(const SpawnRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fail_next_.has_value()) {
    absl::Status status = *fail_next_;
    fail_next_.reset();
    return status;
  }
  const int64_t pid = next_pid_++;
  live_[pid] = Process{request, ignore_sigterm_};
  by_pid_[pid] = request;
  spawned_.push_back(request);
  cv_.notify_all();
  return pid;
}

absl::Status FakeProcessControl::SignalGroup(int64_t pgid, int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  signals_.push_back(Signal{pgid, sig});
  auto it = live_.find(pgid);
  if (it != live_.end() && (sig == SIGKILL || (sig == SIGTERM && !it->second.ignores_sigterm))) {
    EndLocked(pgid, -1, sig);
  }
  cv_.notify_all();
  return absl::OkStatus();
}

std::optional<ProcessExit> FakeProcessControl::WaitAny(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return interrupted_ || !exits_.empty(); });
  if (interrupted_) {
    interrupted_ = false;
    return std::nullopt;
  }
  if (exits_.empty()) return std::nullopt;
  ProcessExit exit = exits_.front();
  exits_.pop_front();
  cv_.notify_all();
  return exit;
}

void FakeProcessControl::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  interrupted_ = true;
  cv_.notify_all();
}

void FakeProcessControl::FailNextSpawn(absl::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_next_ = std::move(status);
}

void FakeProcessControl::IgnoreSigterm(bool ignore) {
  std::lock_guard<std::mutex> lock(mu_);
  ignore_sigterm_ = ignore;
}

void FakeProcessControl::Exit(int64_t pid, int exit_code, int signal) {
  std::lock_guard<std::mutex> lock(mu_);
  EndLocked(pid, signal != 0 ? -1 : exit_code, signal);
  cv_.notify_all();
}

void FakeProcessControl::EndLocked(int64_t pid, int exit_code, int signal) {
  if (live_.erase(pid) == 0) return;
  exits_.push_back(ProcessExit{pid, exit_code, signal});
}

std::vector<SpawnRequest> FakeProcessControl::spawned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spawned_;
}

std::vector<FakeProcessControl::Signal> FakeProcessControl::signals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return signals_;
}

std::set<int64_t> FakeProcessControl::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<int64_t> pids;
  for (const auto& [pid, process] : live_) pids.insert(pid);
  return pids;
}

int64_t FakeProcessControl::PidOf(int32_t rank, int64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = by_pid_.rbegin(); it != by_pid_.rend(); ++it) {
    const bool by_env = EnvValue(it->second, "RINGMASTER_RANK") == absl::StrCat(rank) &&
                        EnvValue(it->second, "RINGMASTER_GENERATION") == absl::StrCat(generation);
    const bool by_work_dir = absl::EndsWith(it->second.cwd, absl::StrCat("/gen-", generation, "/rank-", rank));
    if (by_env || by_work_dir) return it->first;
  }
  return 0;
}

bool FakeProcessControl::WaitFor(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() >= deadline) return pred();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace ringmaster::worker
