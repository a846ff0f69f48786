#include "bench/coordinator_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::bench {
namespace {

// A loopback port that was free a moment ago (the kernel's choice for port 0).
absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  if (port <= 0) return absl::UnavailableError("no free loopback port");
  return port;
}

// "exited 0", "killed by signal 9".
std::string DescribeWait(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return "stopped";
}

// Waits up to `timeout` for `pid` to end; its status description, or empty.
std::string WaitFor(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return DescribeWait(status);
    if (r < 0) return "already reaped";
    if (absl::Now() >= deadline) return "";
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

ProcessMemory ReadProcessMemory(pid_t pid) {
  ProcessMemory out;
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::ByAnyChar(" \t:"), absl::SkipEmpty());
    if (parts.size() < 2) continue;
    int64_t value = 0;
    if (!absl::SimpleAtoi(parts[1], &value)) continue;
    if (parts[0] == "VmHWM") out.vm_hwm = value * 1024;
    if (parts[0] == "VmRSS") out.vm_rss = value * 1024;
    if (parts[0] == "Threads") out.threads = static_cast<int>(value);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Start(
    const CoordinatorProcessOptions& options) {
  std::unique_ptr<CoordinatorProcess> process(new CoordinatorProcess());
  process->options_ = options;
  char tmpl[] = "/tmp/rm-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return absl::UnavailableError("mkdtemp failed");
  process->dir_ = tmpl;
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  process->address_ = absl::StrCat("127.0.0.1:", *port);

  std::vector<std::string> args = {options.binary,  "--listen",         process->address_,
                                   "--state-dir",   process->dir_ + "/state", "--metrics-listen", ""};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  const std::string log = process->dir_ + "/coordinator.log";
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::UnavailableError("fork failed");
  if (pid == 0) {
    // A benchmark killed (a test's timeout, ^C) takes its coordinator with
    // it. The signal is sent when the forking thread ends: Start must be
    // called from a thread that lives as long as the process (main).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(127);  // the parent died before the prctl
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  process->pid_ = pid;

  // Ready once the port accepts a connection (the server is serving then).
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(process->address_, grpc::InsecureChannelCredentials());
  const absl::Time deadline = absl::Now() + options.start_timeout;
  while (true) {
    if (channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Milliseconds(100)))) break;
    const std::string ended = WaitFor(pid, absl::ZeroDuration());
    if (!ended.empty()) {
      process->pid_ = -1;
      return absl::UnavailableError(absl::StrCat(options.binary, " ", ended, " while starting:\n",
                                                 process->LogTail(10)));
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(options.binary, " did not listen on ", process->address_,
                                                 " within ", absl::FormatDuration(options.start_timeout), ":\n",
                                                 process->LogTail(10)));
    }
  }
  return process;
}

CoordinatorProcess::~CoordinatorProcess() {
  Stop();
  if (!dir_.empty() && !options_.keep_state) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string CoordinatorProcess::Stop() {
  if (pid_ <= 0) return stop_status_;
  ::kill(pid_, SIGTERM);
  stop_status_ = WaitFor(pid_, options_.stop_timeout);
  if (stop_status_.empty()) {
    ::kill(pid_, SIGKILL);
    stop_status_ = absl::StrCat("did not stop on SIGTERM: ", WaitFor(pid_, absl::InfiniteDuration()));
  }
  pid_ = -1;
  return stop_status_;
}

std::string CoordinatorProcess::LogTail(int lines) const {
  std::ifstream in(dir_ + "/coordinator.log");
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    tail.push_back(line);
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::ostringstream out;
  for (const std::string& l : tail) out << l << "\n";
  return out.str();
}

}  // namespace ringmaster::bench
