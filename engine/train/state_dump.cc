#include "engine/train/state_dump.h"

#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ringmaster::engine {
namespace {

constexpr int kMaxFrames = 64;
constexpr auto kStackWait = std::chrono::milliseconds(200);

std::atomic<int64_t> g_step{0};
std::atomic<const char*> g_phase{"starting"};
std::atomic<int64_t> g_phase_since_ns{0};

// One stack at a time: the dump thread sets g_stack_target, signals that
// thread, and waits for g_stack_frames >= 0.
std::atomic<pid_t> g_stack_target{0};
std::atomic<int> g_stack_frames{-1};
void* g_frames[kMaxFrames];

int g_wake_fd = -1;  // write end of the dump thread's pipe
std::once_flag g_install_once;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

pid_t Tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

void OnDumpSignal(int) {
  const int saved = errno;
  const char byte = 1;
  if (g_wake_fd >= 0) (void)!::write(g_wake_fd, &byte, 1);
  errno = saved;
}

void OnStackSignal(int) {
  const int saved = errno;
  if (g_stack_target.load(std::memory_order_acquire) == Tid()) {
    g_stack_frames.store(::backtrace(g_frames, kMaxFrames), std::memory_order_release);
  }
  errno = saved;
}

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::vector<pid_t> Threads() {
  std::vector<pid_t> tids;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') tids.push_back(static_cast<pid_t>(std::atoi(entry->d_name)));
  }
  ::closedir(dir);
  return tids;
}

// "state S wchan futex_wait_queue syscall 202 0x7f.." from /proc.
std::string ThreadLine(pid_t tid) {
  const std::string base = absl::StrCat("/proc/self/task/", tid, "/");
  std::string stat = ReadLine(base + "stat");
  std::string state = "?";
  if (size_t paren = stat.rfind(')'); paren != std::string::npos && paren + 2 < stat.size()) {
    state = stat.substr(paren + 2, 1);
  }
  std::string wchan = ReadLine(base + "wchan");
  if (wchan.empty() || wchan == "0") wchan = "-";
  std::string syscall = ReadLine(base + "syscall");
  if (syscall.size() > 60) syscall = syscall.substr(0, 60) + "...";
  return absl::StrFormat("thread %d \"%s\" state %s wchan %s syscall %s\n", tid, ReadLine(base + "comm"), state,
                         wchan, syscall.empty() ? "-" : syscall);
}

// The stack of thread `tid`, written to `fd`; false if it did not answer.
bool WriteStack(int fd, pid_t tid) {
  g_stack_frames.store(-1, std::memory_order_relaxed);
  g_stack_target.store(tid, std::memory_order_release);
  if (::syscall(SYS_tgkill, ::getpid(), tid, SIGURG) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + kStackWait;
  int frames = -1;
  while ((frames = g_stack_frames.load(std::memory_order_acquire)) < 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  g_stack_target.store(0, std::memory_order_release);
  if (frames < 0) return false;
  ::backtrace_symbols_fd(g_frames, frames, fd);
  return true;
}

void DumpLoop(int read_fd, int out_fd) {
  char byte;
  for (;;) {
    ssize_t n = ::read(read_fd, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    WriteStateDump(out_fd);
  }
}

}  // namespace

void SetTrainingStep(int64_t step) { g_step.store(step, std::memory_order_relaxed); }

void SetTrainingPhase(const char* phase) {
  g_phase.store(phase, std::memory_order_relaxed);
  g_phase_since_ns.store(NowNs(), std::memory_order_relaxed);
}

ScopedTrainingPhase::ScopedTrainingPhase(const char* phase) : previous_(g_phase.load(std::memory_order_relaxed)) {
  SetTrainingPhase(phase);
}

ScopedTrainingPhase::~ScopedTrainingPhase() { SetTrainingPhase(previous_); }

void WriteStateDump(int fd) {
  const double in_phase = (NowNs() - g_phase_since_ns.load(std::memory_order_relaxed)) / 1e9;
  std::string head = absl::StrFormat(
      "=== ringmaster state dump (SIGUSR1), pid %d ===\nstep %d, phase \"%s\" for %.2f s\n", ::getpid(),
      g_step.load(std::memory_order_relaxed), g_phase.load(std::memory_order_relaxed), in_phase);
  const std::vector<pid_t> tids = Threads();
  for (pid_t tid : tids) head += ThreadLine(tid);
  WriteAll(fd, head);
  const pid_t self = Tid();
  for (pid_t tid : tids) {
    if (tid == self) continue;
    WriteAll(fd, absl::StrFormat("--- thread %d stack\n", tid));
    if (!WriteStack(fd, tid)) WriteAll(fd, "(no answer: signals blocked)\n");
  }
  WriteAll(fd, "=== end of state dump ===\n");
}

absl::Status InstallStateDumpHandler(int fd) {
  absl::Status status;
  std::call_once(g_install_once, [&] {
    if (g_phase_since_ns.load() == 0) g_phase_since_ns.store(NowNs());
    void* prime[1];
    ::backtrace(prime, 1);  // loads libgcc's unwinder now, not in a handler
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      status = absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
      return;
    }
    ::fcntl(fds[1], F_SETFL, O_NONBLOCK);  // a burst of signals never blocks a handler
    g_wake_fd = fds[1];
    std::thread(DumpLoop, fds[0], fd).detach();
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    action.sa_handler = OnDumpSignal;
    if (::sigaction(SIGUSR1, &action, nullptr) != 0) {
      status = absl::InternalError(absl::StrCat("sigaction(SIGUSR1): ", std::strerror(errno)));
      return;
    }
    action.sa_handler = OnStackSignal;
    if (::sigaction(SIGURG, &action, nullptr) != 0) {
      status = absl::InternalError(absl::StrCat("sigaction(SIGURG): ", std::strerror(errno)));
    }
  });
  return status;
}

}  // namespace ringmaster::engine
