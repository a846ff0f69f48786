// The ringmaster-coordinator binary as a process: it serves, stops on
// SIGTERM with exit status 0 keeping its state, and a startup error (port in
// use, a file that is not a database) is one line on stderr and status 1.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "coordinator/testing/test_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/job_service.grpc.pb.h"

extern char** environ;

namespace ringmaster::coordinator {
namespace {

constexpr char kBinary[] = "coordinator/ringmaster-coordinator";

// A child running the binary with stderr on a pipe. Killed if still running
// when destroyed.
class Coordinator {
 public:
  explicit Coordinator(std::vector<std::string> args) {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    args.insert(args.begin(), kBinary);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, kBinary, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    stderr_fd_ = fds[0];
    fcntl(stderr_fd_, F_SETFL, O_NONBLOCK);
  }
  ~Coordinator() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(stderr_fd_);
  }

  // Waits (at most `timeout`) for the exit; its status, or -1.
  int Wait(absl::Duration timeout = absl::Seconds(20)) {
    const absl::Time give_up = absl::Now() + timeout;
    while (absl::Now() < give_up) {
      Drain();
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        Drain();
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return -1;
  }
  // Waits for a line matching `pattern` on stderr; its first group, or "".
  std::string AwaitLog(const std::string& pattern, absl::Duration timeout = absl::Seconds(20)) {
    const std::regex re(pattern);
    const absl::Time give_up = absl::Now() + timeout;
    while (absl::Now() < give_up) {
      Drain();
      std::smatch m;
      if (std::regex_search(err_, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
      absl::SleepFor(absl::Milliseconds(10));
    }
    return "";
  }
  void Signal(int sig) { kill(pid_, sig); }
  const std::string& err() {
    Drain();
    return err_;
  }

 private:
  void Drain() {
    char buf[4096];
    for (ssize_t n; (n = read(stderr_fd_, buf, sizeof(buf))) > 0;) err_.append(buf, static_cast<size_t>(n));
  }
  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  bool exited_ = false;
  std::string err_;
};

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n', absl::SkipEmpty()); }

TEST(CoordinatorMainTest, ServesStopsOnSigtermAndKeepsItsState) {
  const std::string dir = testing::NewTempDir("main") + "/state";
  std::string job_id;
  {
    Coordinator c({"--listen", "127.0.0.1:0", "--state-dir", dir, "--metrics-listen", "", "--shutdown-timeout", "1s"});
    const std::string port = c.AwaitLog("gRPC on port ([0-9]+)");
    ASSERT_NE(port, "") << c.err();
    auto stub = v1::JobService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    v1::SubmitJobRequest submit;
    *submit.mutable_spec() = testing::MakeSpec(1, 1, v1::ResourceSpec::CPU);
    v1::SubmitJobResponse submitted;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    ASSERT_TRUE(stub->Submit(&context, submit, &submitted).ok());
    job_id = submitted.job().id();
    c.Signal(SIGTERM);
    EXPECT_EQ(c.Wait(), 0) << c.err();
    EXPECT_NE(c.err().find("signal 15: shutting down"), std::string::npos) << c.err();
  }
  Coordinator again({"--listen", "127.0.0.1:0", "--state-dir", dir, "--metrics-listen", ""});
  EXPECT_NE(again.AwaitLog("recovered (1) job"), "") << again.err();
  again.Signal(SIGINT);
  EXPECT_EQ(again.Wait(), 0) << again.err();
}

// `--metrics-listen=` (the form the help names) turns /metrics off, so that
// two coordinators run side by side (a second `ringmaster local up`).
TEST(CoordinatorMainTest, AnEmptyMetricsListenParsesAndDisablesMetrics) {
  Coordinator a({"--listen", "127.0.0.1:0", "--state-dir", testing::NewTempDir("main"), "--metrics-listen="});
  Coordinator b({"--listen", "127.0.0.1:0", "--state-dir", testing::NewTempDir("main"), "--metrics-listen=",
                 "--health-listen="});
  EXPECT_NE(a.AwaitLog("gRPC on port ([0-9]+)"), "") << a.err();
  EXPECT_NE(b.AwaitLog("gRPC on port ([0-9]+)"), "") << b.err();
  EXPECT_EQ(a.err().find("/metrics on"), std::string::npos) << a.err();
}

TEST(CoordinatorMainTest, APortInUseIsOneLineAndStatus1) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string listen = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  Coordinator c(
      {"--listen", listen, "--state-dir", testing::NewTempDir("main"), "--metrics-listen", "", "--log-level", "warn"});
  EXPECT_EQ(c.Wait(), 1);
  EXPECT_EQ(Lines(c.err()), std::vector<std::string>{absl::StrCat("ringmaster-coordinator: cannot listen on ", listen,
                                                                  ": Address already in use")});
  close(fd);
}

TEST(CoordinatorMainTest, AFileThatIsNotADatabaseIsOneLineAndStatus1) {
  const std::string dir = testing::NewTempDir("main");
  { std::ofstream(dir + "/coordinator.db") << std::string(8192, 'x'); }
  Coordinator c({"--listen", "127.0.0.1:0", "--state-dir", dir, "--metrics-listen", "", "--log-level", "warn"});
  EXPECT_EQ(c.Wait(), 1);
  std::vector<std::string> lines = Lines(c.err());
  ASSERT_EQ(lines.size(), 1u) << c.err();
  const std::string prefix =
      absl::StrCat("ringmaster-coordinator: cannot open the database ", dir, "/coordinator.db: ");
  EXPECT_EQ(lines[0].substr(0, prefix.size()), prefix);
  EXPECT_NE(lines[0].find("file is not a database"), std::string::npos) << lines[0];
}

TEST(CoordinatorMainTest, ABadDurationIsOneLineAndStatus1) {
  Coordinator c({"--heartbeat-interval", "soon", "--state-dir", testing::NewTempDir("main")});
  EXPECT_EQ(c.Wait(), 1);
  EXPECT_EQ(Lines(c.err()), std::vector<std::string>{
                                "ringmaster-coordinator: --heartbeat-interval: \"soon\" is not a duration (e.g. 30s, "
                                "500ms, 5m)"});
}

TEST(CoordinatorMainTest, ABadVisibilityIsOneLineAndStatus1) {
  Coordinator c({"--visibility", "public", "--state-dir", testing::NewTempDir("main")});
  EXPECT_EQ(c.Wait(), 1);
  EXPECT_EQ(Lines(c.err()),
            std::vector<std::string>{"ringmaster-coordinator: --visibility: must be \"team\" (a job's owner, its "
                                     "queue's members and admins read it) or \"open\" (every user reads every job), "
                                     "got \"public\""});
}

}  // namespace
}  // namespace ringmaster::coordinator
