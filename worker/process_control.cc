#include "worker/process_control.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"

namespace ringmaster::worker {
namespace {

absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

RealProcessControl::RealProcessControl(absl::Duration poll_interval)
    : poll_interval_(poll_interval), spawner_([this] { SpawnerLoop(); }) {}

RealProcessControl::~RealProcessControl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  spawn_cv_.notify_all();
  spawner_.join();
}

absl::StatusOr<int64_t> RealProcessControl::Spawn(const SpawnRequest& request) {
  if (request.path.empty() || request.argv.empty()) {
    return absl::InvalidArgumentError("spawn: the path and argv must not be empty");
  }
  SpawnJob job{&request};
  std::unique_lock<std::mutex> lock(mu_);
  if (closing_) return absl::FailedPreconditionError("spawn: the process control is closing");
  spawn_queue_.push_back(&job);
  spawn_cv_.notify_all();
  spawn_cv_.wait(lock, [&] { return job.done; });
  return job.result;
}

void RealProcessControl::SpawnerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    spawn_cv_.wait(lock, [&] { return closing_ || !spawn_queue_.empty(); });
    if (spawn_queue_.empty()) return;  // closing, nothing left
    SpawnJob* job = spawn_queue_.front();
    spawn_queue_.pop_front();
    lock.unlock();
    absl::StatusOr<int64_t> result = DoSpawn(*job->request);
    lock.lock();
    if (result.ok()) {
      children_.insert(static_cast<pid_t>(*result));
      wait_cv_.notify_all();
    }
    job->result = std::move(result);
    job->done = true;
    spawn_cv_.notify_all();
  }
}

absl::StatusOr<int64_t> RealProcessControl::DoSpawn(const SpawnRequest& request) {
  if (!request.credentials.has_value()) {
    if (absl::Status s = MakeDirs(request.cwd); !s.ok()) return s;
  }
  if (absl::Status s = MakeDirs(std::filesystem::path(request.log_path).parent_path().string()); !s.ok()) return s;
  SpawnOptions options;
  options.path = request.path;
  options.argv = request.argv;
  options.env = request.env;
  options.cwd = request.cwd;
  options.output_path = request.log_path.empty() ? "/dev/null" : request.log_path;
  options.group = SpawnOptions::Group::kNewGroup;
  options.die_with_parent = true;  // this thread lives as long as the object
  options.credentials = request.credentials;
  absl::StatusOr<pid_t> pid = ringmaster::Spawn(options);
  if (!pid.ok()) return absl::Status(pid.status().code(), absl::StrCat("spawn: ", pid.status().message()));
  return static_cast<int64_t>(*pid);
}

absl::Status RealProcessControl::SignalGroup(int64_t pgid, int sig) {
  if (pgid <= 1) return absl::InvalidArgumentError(absl::StrCat("signal: bad process group ", pgid));
  if (kill(-static_cast<pid_t>(pgid), sig) == 0 || errno == ESRCH) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("kill(-", pgid, ", ", sig, "): ", std::strerror(errno)));
}

std::optional<ProcessExit> RealProcessControl::WaitAny(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (interrupted_) {
      interrupted_ = false;
      return std::nullopt;
    }
    for (auto it = children_.begin(); it != children_.end(); ++it) {
      std::optional<ringmaster::ProcessExit> ended = TryReap(*it);
      if (!ended.has_value()) continue;
      children_.erase(it);
      return ProcessExit{ended->pid, ended->exit_code, ended->signal};
    }
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return std::nullopt;
    wait_cv_.wait_for(lock, absl::ToChronoNanoseconds(std::min(left, poll_interval_)));
  }
}

void RealProcessControl::Interrupt() {
  std::lock_guard<std::mutex> lock(mu_);
  interrupted_ = true;
  wait_cv_.notify_all();
}

}  // namespace ringmaster::worker
