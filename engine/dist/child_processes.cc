#include "engine/dist/child_processes.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ringmaster::engine::dist {
namespace {

ChildExit FromWaitStatus(int status) {
  ChildExit exit;
  if (WIFEXITED(status)) {
    exit.exited = true;
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  }
  return exit;
}

// How often WaitAll looks for exited children.
constexpr absl::Duration kReapInterval = absl::Milliseconds(5);

}  // namespace

std::string ChildExit::Describe() const {
  if (timed_out) return "timed out (killed)";
  if (exited) return absl::StrCat("exit ", exit_code);
  return absl::StrCat("signal ", signal);
}

ChildProcesses::ChildProcesses(int count, const std::function<int(int rank)>& body)
    : exits_(count), reaped_(count, false) {
  const pid_t parent = ::getpid();
  std::fflush(nullptr);  // do not let children flush the parent's buffered output
  for (int rank = 0; rank < count; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(125);  // the parent died before prctl
      int code = body(rank);
      std::fflush(nullptr);
      ::_exit(code);
    }
    if (pid < 0) {
      std::perror("fork");
      std::abort();  // a test machine that cannot fork cannot run these tests
    }
    pids_.push_back(pid);
  }
}

ChildProcesses::~ChildProcesses() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (reaped_[i]) continue;
    ::kill(pids_[i], SIGKILL);
    int status;
    ::waitpid(pids_[i], &status, 0);
  }
}

void ChildProcesses::Kill(int rank, int signal) {
  if (!reaped_[rank]) ::kill(pids_[rank], signal);
}

std::vector<ChildExit> ChildProcesses::WaitAll(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    bool all_done = true;
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (reaped_[i]) continue;
      int status;
      pid_t done = ::waitpid(pids_[i], &status, WNOHANG);
      if (done == pids_[i]) {
        exits_[i] = FromWaitStatus(status);
        reaped_[i] = true;
      } else {
        all_done = false;
      }
    }
    if (all_done) return exits_;
    if (absl::Now() >= deadline) break;
    absl::SleepFor(kReapInterval);
  }
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (reaped_[i]) continue;
    ::kill(pids_[i], SIGKILL);
    int status;
    ::waitpid(pids_[i], &status, 0);
    exits_[i] = FromWaitStatus(status);
    exits_[i].timed_out = true;
    reaped_[i] = true;
  }
  return exits_;
}

}  // namespace ringmaster::engine::dist
