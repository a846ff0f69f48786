#include "client/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace ringmaster::client {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
// How long to wait for a SIGKILLed process to disappear.
constexpr absl::Duration kKillWait = absl::Seconds(5);
// LastLine reads at most this much of the end of a file.
constexpr std::streamoff kTailBytes = 64 * 1024;

// Field 22 (starttime) and field 3 (state) of /proc/<pid>/stat.
bool ReadStat(pid_t pid, uint64_t* start_time, char* state) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state); field 22 is fields[19].
  if (fields.size() < 20 || fields[0].empty()) return false;
  *state = fields[0][0];
  return absl::SimpleAtoi(fields[19], start_time);
}

absl::Status ErrnoError(const std::string& what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(err)));
}

void Sleep(Clock* clock, absl::Duration d) { clock->SleepFor(d); }

}  // namespace

bool ProcessRunning(pid_t pid, std::optional<uint64_t> start_time) {
  if (pid <= 0) return false;
  uint64_t actual = 0;
  char state = 0;
  if (!ReadStat(pid, &actual, &state)) return false;
  if (state == 'Z' || state == 'X') return false;
  return !start_time.has_value() || *start_time == actual;
}

std::optional<std::string> ReapIfExited(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  if (WIFEXITED(status)) return absl::StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return "stopped";
}

absl::StatusOr<pid_t> StartDaemon(const DaemonSpec& spec) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, spec.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  sigset_t empty;
  sigemptyset(&empty);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> argv_strings = {spec.binary};
  argv_strings.insert(argv_strings.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int err = ::posix_spawn(&pid, spec.binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) return ErrnoError(absl::StrCat("cannot start ", spec.binary), err);

  uint64_t start_time = 0;
  char state = 0;
  if (!ReadStat(pid, &start_time, &state)) start_time = 0;
  const std::string temp = spec.pid_file + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << pid << " " << start_time << "\n";
    if (!out.flush()) {
      ::kill(-pid, SIGKILL);
      return absl::InternalError(absl::StrCat("cannot write ", temp));
    }
  }
  if (std::rename(temp.c_str(), spec.pid_file.c_str()) != 0) {
    const int rename_err = errno;
    ::kill(-pid, SIGKILL);
    return ErrnoError(absl::StrCat("cannot write ", spec.pid_file), rename_err);
  }
  return pid;
}

DaemonState ReadDaemon(const std::string& pid_file) {
  DaemonState state;
  std::ifstream in(pid_file);
  if (!in) return state;
  state.pid_file_exists = true;
  long long pid = 0;
  unsigned long long start_time = 0;
  in >> pid >> start_time;
  if (pid <= 0) return state;
  state.pid = static_cast<pid_t>(pid);
  // A start time of 0 means it could not be read at spawn: trust the pid.
  state.running = ProcessRunning(state.pid, start_time == 0 ? std::nullopt : std::optional<uint64_t>(start_time));
  return state;
}

absl::StatusOr<DaemonState> StopDaemon(const std::string& pid_file, absl::Duration grace, Clock* clock) {
  DaemonState state = ReadDaemon(pid_file);
  if (state.running) {
    // The daemon leads its own process group (setsid); fall back to the pid.
    const pid_t target = ::getpgid(state.pid) == state.pid ? -state.pid : state.pid;
    if (::kill(target, SIGTERM) != 0 && errno != ESRCH) {
      return ErrnoError(absl::StrCat("cannot signal pid ", state.pid), errno);
    }
    const absl::Time deadline = clock->Now() + grace;
    while (ProcessRunning(state.pid) && clock->Now() < deadline) {
      (void)ReapIfExited(state.pid);
      Sleep(clock, kPollInterval);
    }
    if (ProcessRunning(state.pid)) {
      ::kill(target, SIGKILL);
      const absl::Time kill_deadline = clock->Now() + kKillWait;
      while (ProcessRunning(state.pid) && clock->Now() < kill_deadline) {
        (void)ReapIfExited(state.pid);
        Sleep(clock, kPollInterval);
      }
    }
    (void)ReapIfExited(state.pid);
  }
  if (state.pid_file_exists && std::remove(pid_file.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(absl::StrCat("cannot remove ", pid_file), errno);
  }
  return state;
}

std::string LastLine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > kTailBytes) in.seekg(size - kTailBytes);
  else in.seekg(0);
  std::string line;
  std::string last;
  while (std::getline(in, line)) {
    // CLI11 follows a flag error with this hint; the error is the useful line.
    if (absl::StartsWith(line, "Run with --help")) continue;
    if (!absl::StripAsciiWhitespace(line).empty()) last = line;
  }
  return last;
}

}  // namespace ringmaster::client
