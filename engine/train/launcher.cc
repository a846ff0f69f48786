#include "engine/train/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

// The signal the launcher received (0 if none), passed on to the ranks.
std::atomic<int> forwarded_signal{0};

void RecordSignal(int sig) { forwarded_signal.store(sig); }

std::string DescribeExit(int rank, int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("rank ", rank, " was killed by signal ", WTERMSIG(status));
  return absl::StrCat("rank ", rank, " exited with status ", WEXITSTATUS(status));
}

// In the child: environment, parent-death signal, exec. Never returns.
[[noreturn]] void ExecRank(const LaunchOptions& options, int rank, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the launcher died before prctl
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  setenv("RINGMASTER_RANK", std::to_string(rank).c_str(), 1);
  setenv("RINGMASTER_LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("RINGMASTER_WORLD_SIZE", std::to_string(options.nproc).c_str(), 1);
  for (const auto& [key, value] : options.env) setenv(key.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  std::fprintf(stderr, "rank %d: cannot run %s: %s\n", rank, argv[0], std::strerror(errno));
  _exit(127);
}

class RankSet {
 public:
  explicit RankSet(int n) : pids_(n, -1) {}
  void Set(int rank, pid_t pid) { pids_[rank] = pid; }
  int RankOf(pid_t pid) const {
    for (size_t r = 0; r < pids_.size(); ++r)
      if (pids_[r] == pid) return static_cast<int>(r);
    return -1;
  }
  void Exited(int rank) { pids_[rank] = -1; }
  bool AnyRunning() const {
    for (pid_t p : pids_)
      if (p > 0) return true;
    return false;
  }
  void SignalAll(int sig) const {
    for (pid_t p : pids_)
      if (p > 0) kill(p, sig);
  }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace

absl::Status RunLocalRanks(const LaunchOptions& options) {
  if (options.nproc < 1) return absl::InvalidArgumentError(absl::StrCat("nproc must be >= 1, got ", options.nproc));
  if (options.argv.empty()) return absl::InvalidArgumentError("no command to launch");
  struct sigaction action = {};
  action.sa_handler = RecordSignal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int, old_term;
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  forwarded_signal.store(0);

  RankSet ranks(options.nproc);
  absl::Status result = absl::OkStatus();
  const pid_t self = getpid();
  for (int r = 0; r < options.nproc; ++r) {
    pid_t pid = fork();
    if (pid == 0) ExecRank(options, r, self);
    if (pid < 0) {
      result = absl::InternalError(absl::StrCat("cannot start rank ", r, ": ", std::strerror(errno)));
      break;
    }
    ranks.Set(r, pid);
  }

  bool stopping = !result.ok();
  absl::Time kill_at = absl::InfiniteFuture();
  if (stopping) {
    ranks.SignalAll(SIGTERM);
    kill_at = absl::Now() + options.grace;
  }
  while (ranks.AnyRunning()) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int rank = ranks.RankOf(pid);
      if (rank < 0) continue;
      ranks.Exited(rank);
      bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && result.ok()) {
        result = absl::AbortedError(DescribeExit(rank, status));
        if (!stopping) spdlog::error("{}: stopping the other ranks", std::string(result.message()));
      }
      if (failed && !stopping) {
        stopping = true;
        ranks.SignalAll(SIGTERM);
        kill_at = absl::Now() + options.grace;
      }
      continue;
    }
    if (int sig = forwarded_signal.exchange(0); sig != 0) {
      ranks.SignalAll(sig);
      if (!stopping) {
        stopping = true;
        kill_at = absl::Now() + options.grace;
        if (result.ok()) result = absl::CancelledError(absl::StrCat("stopped by signal ", sig));
      }
    }
    if (absl::Now() >= kill_at) {
      ranks.SignalAll(SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
    usleep(10000);  // poll children and signals every 10 ms
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return result;
}

}  // namespace ringmaster::engine
