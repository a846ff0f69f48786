#include "client/daemon.h"

#include <fcntl.h>
#include <signal.h>
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
#include "common/subprocess.h"

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
  std::optional<ProcessExit> exit = TryReap(pid);
  if (!exit.has_value() || (exit->exit_code < 0 && exit->signal == 0)) return std::nullopt;  // running, or not ours
  return exit->Describe();
}

absl::StatusOr<pid_t> StartDaemon(const DaemonSpec& spec) {
  SpawnOptions options;
  options.path = spec.binary;
  options.argv = {spec.binary};
  options.argv.insert(options.argv.end(), spec.args.begin(), spec.args.end());
  options.output_path = spec.log_file;
  options.group = SpawnOptions::Group::kNewSession;  // outlives the CLI and its terminal
  absl::StatusOr<pid_t> spawned = Spawn(options);
  if (!spawned.ok()) {
    return absl::Status(spawned.status().code(),
                        absl::StrCat("cannot start ", spec.binary, ": ", spawned.status().message()));
  }
  const pid_t pid = *spawned;

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
