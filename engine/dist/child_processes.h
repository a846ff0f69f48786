#ifndef RINGMASTER_ENGINE_DIST_CHILD_PROCESSES_H_
#define RINGMASTER_ENGINE_DIST_CHILD_PROCESSES_H_

// ChildProcesses (tests only): forks N children that each run body(rank) and
// exit with its return value, then waits for them with a bounded timeout,
// SIGKILLing and reaping whatever is still running — so nothing a test starts
// outlives it. Children also get SIGKILL if the test process dies
// (PR_SET_PDEATHSIG). A child leaves with _exit, running no destructors or
// atexit handlers of the parent's state.
//
// Not thread-safe: one thread drives it. Fork from a process whose other
// threads hold no locks the children need (children should build their own
// objects: stores, groups).

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ringmaster::engine::dist {

struct ChildExit {
  bool exited = false;     // exited normally, with exit_code
  int exit_code = -1;
  int signal = 0;          // or was killed by this signal
  bool timed_out = false;  // killed by WaitAll at its deadline
  std::string Describe() const;  // "exit 0", "signal 9", "timed out (killed)"
  bool Succeeded() const { return exited && exit_code == 0; }
};

class ChildProcesses {
 public:
  // Forks `count` children; child `rank` runs body(rank) and _exits with its result.
  ChildProcesses(int count, const std::function<int(int rank)>& body);
  // Kills and reaps any child still running.
  ~ChildProcesses();

  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

  pid_t pid(int rank) const { return pids_[rank]; }
  void Kill(int rank, int signal);
  // Waits until every child has exited or `timeout` passes; then kills and
  // reaps the rest (timed_out). Returns each child's exit.
  std::vector<ChildExit> WaitAll(absl::Duration timeout);

 private:
  std::vector<pid_t> pids_;
  std::vector<ChildExit> exits_;
  std::vector<bool> reaped_;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_CHILD_PROCESSES_H_
