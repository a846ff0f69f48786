#ifndef RINGMASTER_COMMON_SUBPROCESS_H_
#define RINGMASTER_COMMON_SUBPROCESS_H_

// Starting and reaping child processes, the one copy (the worker's trainers,
// `ringmaster-trainer --nproc`'s ranks, `ringmaster local`'s daemons).
//
// Spawn forks and execs with everything prepared in the parent: between fork
// and exec the child makes only async-signal-safe calls, and reports a
// failure to set itself up or to exec through a close-on-exec pipe, so that
// Spawn returns the reason ("cannot run /x/trainer: No such file or
// directory") instead of a child that exits 127. Thread-safe.
//
// PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so a
// caller wanting die_with_parent forks from a thread that lives as long as it
// (worker/process_control.h keeps one for that).

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

struct SpawnOptions {
  // The executable (an absolute path, or relative to the caller's directory).
  std::string path;
  // argv, argv[0] included; empty: {path}.
  std::vector<std::string> argv;
  // The whole environment, "KEY=VALUE" each; nullopt: the caller's own with
  // `extra_env` set on top.
  std::optional<std::vector<std::string>> env;
  std::vector<std::string> extra_env;
  // Working directory; empty: the caller's.
  std::string cwd;
  // stdout and stderr are appended to this file (created, mode 0644); empty:
  // inherited. stdin is /dev/null.
  std::string output_path;
  enum class Group {
    kInherit,     // stays in the caller's process group (gets its terminal's signals)
    kNewGroup,    // leads a new process group (pgid = pid): signal it as a whole
    kNewSession,  // leads a new session (setsid): outlives the caller's terminal
  };
  Group group = Group::kInherit;
  // SIGKILL when the forking thread ends (PR_SET_PDEATHSIG); a child whose
  // parent died before it could ask exits 127.
  bool die_with_parent = false;
  // Run as this account instead of the caller's. Between fork and exec the
  // child, after opening its output file (as the caller), sets exactly these
  // supplementary groups, then its real, effective and saved gid and uid;
  // clears every capability (ambient, inheritable, permitted, effective)
  // and sets PR_SET_NO_NEW_PRIVS, so that nothing it execs can regain
  // privileges; then changes to `cwd` and execs, both checked as the account.
  // Needs CAP_SETUID and CAP_SETGID (root has them).
  struct Credentials {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
  };
  std::optional<Credentials> credentials;
};

// Starts the child with signals unblocked and at their default actions, and
// descriptors other than 0-2 closed. Returns its pid. INVALID_ARGUMENT for an
// empty path; FAILED_PRECONDITION when the program cannot be run or the output
// file or directory is unusable (naming it); PERMISSION_DENIED when the child
// cannot take `credentials`; UNAVAILABLE when fork fails for lack of
// resources (retry later).
absl::StatusOr<pid_t> Spawn(const SpawnOptions& options);

// How a child ended.
struct ProcessExit {
  pid_t pid = 0;
  int exit_code = -1;  // -1 when a signal killed it (or unknown)
  int signal = 0;      // the signal that killed it; 0 when it exited
  bool Succeeded() const { return signal == 0 && exit_code == 0; }
  // "exited with status 1", "was killed by signal 9".
  std::string Describe() const;
};

// Reaps `pid` if it has ended (waitpid WNOHANG); nullopt while it runs.
// A pid that is not (or no longer) a child of this process: ended, how
// unknown (exit_code -1, signal 0).
std::optional<ProcessExit> TryReap(pid_t pid);

// Waits for any child of this process (waitpid(-1), WNOHANG): the first that
// has ended, reaped; nullopt if none has.
std::optional<ProcessExit> TryReapAny();

}  // namespace ringmaster

#endif  // RINGMASTER_COMMON_SUBPROCESS_H_
