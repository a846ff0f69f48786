#include "common/subprocess.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace ringmaster {
namespace {

// What the child reports through its close-on-exec pipe when it cannot exec.
struct ChildFailure {
  int stage;  // kStage*
  int error;  // errno
};
constexpr int kStageOutput = 1;
constexpr int kStageCwd = 2;
constexpr int kStageExec = 3;
constexpr int kStageCredentials = 4;
constexpr unsigned kCloseRangeCloexec = 1U << 2;  // CLOSE_RANGE_CLOEXEC (Linux 5.11)

// Everything the child needs, made in the parent (no allocation after fork).
struct Prepared {
  std::vector<std::string> argv_strings;
  std::vector<std::string> env_strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// The caller's environment with `extra` ("KEY=VALUE") set on top.
std::vector<std::string> Environment(const std::vector<std::string>& extra) {
  std::map<std::string, std::string> env;
  auto put = [&](const std::string& kv) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  };
  for (char** e = environ; *e != nullptr; ++e) put(*e);
  for (const std::string& kv : extra) put(kv);
  std::vector<std::string> out;
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

// Between fork and exec (async-signal-safe): become `c` for good. Raw
// system calls: the child has one thread, and glibc's wrappers would try to
// change every thread of the parent's.
template <typename Fail>
void DropPrivileges(const SpawnOptions::Credentials& c, const Fail& fail) {
  if (syscall(SYS_setgroups, c.groups.size(), c.groups.data()) != 0) fail(kStageCredentials);
  if (syscall(SYS_setresgid, c.gid, c.gid, c.gid) != 0) fail(kStageCredentials);
  if (syscall(SYS_setresuid, c.uid, c.uid, c.uid) != 0) fail(kStageCredentials);
  // From uid 0 the kernel has cleared the permitted and effective sets; a
  // worker that is not root but holds capabilities keeps them across
  // setresuid (and its ambient ones across exec): clear all, explicitly.
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) fail(kStageCredentials);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capset, &header, none) != 0) fail(kStageCredentials);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(kStageCredentials);
  if (getuid() != c.uid || geteuid() != c.uid || getgid() != c.gid || getegid() != c.gid) {
    errno = EPERM;
    fail(kStageCredentials);
  }
}

// Between fork and exec only async-signal-safe calls.
[[noreturn]] void ChildAfterFork(const SpawnOptions& o, const Prepared& p, int report_fd, pid_t parent) {
  auto fail = [report_fd](int stage) {
    ChildFailure failure{stage, errno};
    ssize_t ignored = write(report_fd, &failure, sizeof(failure));
    (void)ignored;
    _exit(127);
  };
  if (o.group == SpawnOptions::Group::kNewGroup) setpgid(0, 0);
  if (o.group == SpawnOptions::Group::kNewSession) setsid();
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // daemons block SIGINT/SIGTERM for sigwait
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // SIGPIPE may be ignored
  // Descriptors opened without O_CLOEXEC must not leak into the child.
  syscall(SYS_close_range, 3U, ~0U, kCloseRangeCloexec);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  if (!o.output_path.empty()) {
    int out = open(o.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) fail(kStageOutput);
    if (out <= STDERR_FILENO) fcntl(out, F_SETFD, 0);  // dup2 onto itself would keep O_CLOEXEC
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
  }
  if (o.credentials.has_value()) DropPrivileges(*o.credentials, fail);
  // After the credentials change, which clears the parent-death signal.
  if (o.die_with_parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
  }
  if (!o.cwd.empty() && chdir(o.cwd.c_str()) != 0) fail(kStageCwd);
  execve(o.path.c_str(), p.argv.data(), p.envp.data());
  fail(kStageExec);
  _exit(127);
}

ProcessExit FromWaitStatus(pid_t pid, int status) {
  ProcessExit exit;
  exit.pid = pid;
  if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  }
  return exit;
}

}  // namespace

std::string ProcessExit::Describe() const {
  if (signal != 0) return absl::StrCat("was killed by signal ", signal);
  if (exit_code < 0) return "ended (how is unknown)";
  return absl::StrCat("exited with status ", exit_code);
}

absl::StatusOr<pid_t> Spawn(const SpawnOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("spawn: the path must not be empty");
  Prepared p;
  p.argv_strings = options.argv.empty() ? std::vector<std::string>{options.path} : options.argv;
  p.env_strings = options.env.has_value() ? *options.env : Environment(options.extra_env);
  p.argv = CStrings(p.argv_strings);
  p.envp = CStrings(p.env_strings);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("spawn ", options.path, ": pipe: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) ChildAfterFork(options, p, report[1], parent);
  const int fork_errno = errno;
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    const std::string message = absl::StrCat("spawn ", options.path, ": fork: ", std::strerror(fork_errno));
    return fork_errno == EAGAIN || fork_errno == ENOMEM ? absl::UnavailableError(message)
                                                        : absl::InternalError(message);
  }
  // Also in the parent, so that a signal sent right after Spawn reaches the group.
  if (options.group == SpawnOptions::Group::kNewGroup) setpgid(pid, pid);
  ChildFailure failure{};
  ssize_t n;
  do {
    n = read(report[0], &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n != static_cast<ssize_t>(sizeof(failure))) return pid;  // exec'd: the pipe closed empty
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  switch (failure.stage) {
    case kStageOutput:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open the output file ", options.output_path, ": ", std::strerror(failure.error)));
    case kStageCwd:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot enter the directory ", options.cwd, ": ", std::strerror(failure.error)));
    case kStageCredentials:
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot run ", options.path, " as uid ", options.credentials->uid, " gid ", options.credentials->gid,
          ": ", std::strerror(failure.error), " (starting a process as another account needs CAP_SETUID and "
          "CAP_SETGID)"));
    default:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot run ", options.path, ": ", std::strerror(failure.error)));
  }
}

std::optional<ProcessExit> TryReap(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  if (r < 0) return ProcessExit{pid, -1, 0};  // not our child (ECHILD): reaped elsewhere
  return FromWaitStatus(pid, status);
}

std::optional<ProcessExit> TryReapAny() {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(-1, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return std::nullopt;
  return FromWaitStatus(r, status);
}

}  // namespace ringmaster
