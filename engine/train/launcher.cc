#include "engine/train/launcher.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

// The signal the launcher received (0 if none), passed on to the ranks.
std::atomic<int> forwarded_signal{0};

void RecordSignal(int sig) { forwarded_signal.store(sig); }

std::string DescribeExit(int rank, const ProcessExit& exit) { return absl::StrCat("rank ", rank, " ", exit.Describe()); }

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
  for (int r = 0; r < options.nproc; ++r) {
    SpawnOptions rank;
    rank.path = options.argv[0];
    rank.argv = options.argv;
    rank.extra_env = {absl::StrCat("RINGMASTER_RANK=", r), absl::StrCat("RINGMASTER_LOCAL_RANK=", r),
                      absl::StrCat("RINGMASTER_WORLD_SIZE=", options.nproc)};
    for (const auto& [key, value] : options.env) rank.extra_env.push_back(absl::StrCat(key, "=", value));
    rank.die_with_parent = true;  // in the launcher's group: a terminal's ^C reaches the ranks too
    absl::StatusOr<pid_t> pid = Spawn(rank);
    if (!pid.ok()) {
      result = absl::Status(pid.status().code(), absl::StrCat("cannot start rank ", r, ": ", pid.status().message()));
      break;
    }
    ranks.Set(r, *pid);
  }

  bool stopping = !result.ok();
  absl::Time kill_at = absl::InfiniteFuture();
  if (stopping) {
    ranks.SignalAll(SIGTERM);
    kill_at = absl::Now() + options.grace;
  }
  while (ranks.AnyRunning()) {
    if (std::optional<ProcessExit> exit = TryReapAny(); exit.has_value()) {
      int rank = ranks.RankOf(exit->pid);
      if (rank < 0) continue;
      ranks.Exited(rank);
      bool failed = !exit->Succeeded();
      if (failed && result.ok()) {
        result = absl::AbortedError(DescribeExit(rank, *exit));
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
