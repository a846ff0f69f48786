#include "worker/process_control.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringmaster::worker {
namespace {

// What the child reports through its close-on-exec pipe when it cannot exec.
struct ChildFailure {
  int stage;  // kStage*
  int error;  // errno
};
constexpr int kStageLog = 1;
constexpr int kStageCwd = 2;
constexpr int kStageExec = 3;
constexpr unsigned kCloseRangeCloexec = 1U << 2;  // CLOSE_RANGE_CLOEXEC (Linux 5.11)

const char* StageName(int stage) {
  switch (stage) {
    case kStageLog:
      return "cannot open its log file";
    case kStageCwd:
      return "cannot enter its working directory";
    default:
      return "cannot run";
  }
}

// Between fork and exec only async-signal-safe calls: everything was
// prepared by the parent.
[[noreturn]] void ChildAfterFork(const char* path, char* const* argv, char* const* envp, const char* cwd,
                                 const char* log_path, int report_fd, pid_t parent) {
  auto fail = [report_fd](int stage) {
    ChildFailure failure{stage, errno};
    ssize_t ignored = write(report_fd, &failure, sizeof(failure));
    (void)ignored;
    _exit(127);
  };
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the worker died before prctl
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the worker blocks SIGINT/SIGTERM
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // SIGPIPE may be ignored
  // Descriptors the worker opened without O_CLOEXEC must not leak into ranks.
  syscall(SYS_close_range, 3U, ~0U, kCloseRangeCloexec);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) fail(kStageLog);
  if (log <= STDERR_FILENO) fcntl(log, F_SETFD, 0);  // dup2 onto itself would keep O_CLOEXEC
  dup2(log, STDOUT_FILENO);
  dup2(log, STDERR_FILENO);
  if (chdir(cwd) != 0) fail(kStageCwd);
  execve(path, argv, envp);
  fail(kStageExec);
  _exit(127);
}

absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
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
  if (absl::Status s = MakeDirs(request.cwd); !s.ok()) return s;
  if (absl::Status s = MakeDirs(std::filesystem::path(request.log_path).parent_path().string()); !s.ok()) return s;
  std::vector<char*> argv = CStrings(request.argv);
  std::vector<char*> envp = CStrings(request.env);
  const char* cwd = request.cwd.empty() ? "." : request.cwd.c_str();
  const char* log_path = request.log_path.empty() ? "/dev/null" : request.log_path.c_str();
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("spawn ", request.path, ": pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) ChildAfterFork(request.path.c_str(), argv.data(), envp.data(), cwd, log_path, report[1], parent);
  int fork_errno = errno;
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    std::string message = absl::StrCat("spawn ", request.path, ": fork: ", std::strerror(fork_errno));
    return fork_errno == EAGAIN || fork_errno == ENOMEM ? absl::UnavailableError(message)
                                                        : absl::InternalError(message);
  }
  setpgid(pid, pid);  // also in the parent, so a signal sent right after Spawn reaches the group
  ChildFailure failure{};
  ssize_t n;
  do {
    n = read(report[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(failure))) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const std::string& what = failure.stage == kStageLog   ? request.log_path
                              : failure.stage == kStageCwd ? request.cwd
                                                           : request.path;
    return absl::FailedPreconditionError(
        absl::StrCat("spawn: ", StageName(failure.stage), " ", what, ": ", std::strerror(failure.error)));
  }
  return static_cast<int64_t>(pid);
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
    for (auto it = children_.begin(); it != children_.end();) {
      int status = 0;
      pid_t r = waitpid(*it, &status, WNOHANG);
      if (r == 0 || (r < 0 && errno == EINTR)) {
        ++it;
        continue;
      }
      ProcessExit exit;
      exit.pid = *it;
      children_.erase(it);
      if (r > 0 && WIFSIGNALED(status)) {
        exit.signal = WTERMSIG(status);
      } else if (r > 0 && WIFEXITED(status)) {
        exit.exit_code = WEXITSTATUS(status);
      }  // r < 0 (ECHILD): reaped elsewhere; how it ended is unknown
      return exit;
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
