// `ringmaster local up|down|status` with fake daemons: shell scripts named
// ringmaster-coordinator and ringmaster-worker that record their arguments
// and sleep (or fail), while an in-process FakeCoordinator answers the health
// checks and ListNodes. Every test stops what it started (TearDown runs
// `down`), and the scripts sleep at most 300 s anyway.

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/daemon.h"
#include "client/fake_job_service.h"
#include "client/local_cluster.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringmaster::client {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteScript(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
}

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = absl::StrCat(tmp ? tmp : "/tmp", "/local_", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ + "/bin");
    options_.state_dir = root_ + "/state";
    options_.bin_dir = root_ + "/bin";
    options_.cpu_slots = 3;
    options_.startup_timeout = absl::Seconds(10);
    options_.stop_grace = absl::Seconds(5);
    global_.coordinator = fake_.address();
    // The worker's node, registered "after" it starts.
    v1::NodeInfo* node = fake_.service().script().list_nodes.add_nodes();
    node->set_node_id("n-1");
    node->set_hostname("box");
    node->set_state(v1::NODE_STATE_READY);
    node->set_cpu_slots(3);
    node->set_free_cpu_slots(3);
    node->mutable_register_time()->set_seconds(absl::ToUnixSeconds(absl::Now()) + 60);
    Daemon("coordinator", "echo coordinator listening\nexec sleep 300\n");
    Daemon("worker", "echo worker registered\nexec sleep 300\n");
  }
  void TearDown() override {
    std::ostringstream out, err;
    Console console{out, err};
    RunLocalDown(global_, options_, console);
  }

  // A fake daemon: records its arguments in <bin>/<name>.args (written whole,
  // through a rename), then `body`.
  void Daemon(const std::string& name, const std::string& body) {
    const std::string args = absl::StrCat(options_.bin_dir, "/", name, ".args");
    WriteScript(options_.bin_dir + "/ringmaster-" + name,
                absl::StrCat("echo \"$@\" > ", args, ".tmp && mv ", args, ".tmp ", args, "\n", body));
  }
  // The arguments `name` was started with. `up` returns once the fake
  // coordinator reports the node, which may be before the script has run its
  // first line, so this waits for the file (at most 10 s).
  std::string Args(const std::string& name) const {
    const std::string path = absl::StrCat(options_.bin_dir, "/", name, ".args");
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (!std::filesystem::exists(path) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    return ReadAll(path);
  }
  std::string State(const std::string& file) const { return options_.state_dir + "/" + file; }
  int Up() { return RunLocalUp(global_, options_, console_); }

  std::string root_;
  FakeCoordinator fake_;
  GlobalOptions global_;
  LocalOptions options_;
  std::ostringstream out_;
  std::ostringstream err_;
  Console console_{out_, err_};
};

TEST_F(LocalClusterTest, UpStartsBothWithTheirFlagsStatusThenDownStopsThem) {
  ASSERT_EQ(Up(), kExitOk) << err_.str();
  EXPECT_EQ(err_.str(), "");
  EXPECT_EQ(Args("coordinator"),
            absl::StrCat("--listen ", fake_.address(), " --state-dir ", options_.state_dir,
                         "/coordinator --metrics-listen 127.0.0.1:0\n"));
  EXPECT_EQ(Args("worker"),
            absl::StrCat("--coordinator ", fake_.address(), " --cpu-slots 3 --state-dir ", options_.state_dir,
                         "/worker --listen-address 127.0.0.1 --metrics-listen 127.0.0.1:0\n"));
  const DaemonState coordinator = ReadDaemon(State("coordinator.pid"));
  const DaemonState worker = ReadDaemon(State("worker.pid"));
  EXPECT_TRUE(coordinator.running);
  EXPECT_TRUE(worker.running);
  EXPECT_THAT(out_.str(), ::testing::StartsWith("COMPONENT    STATE    PID"));
  EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("coordinator  started  ", coordinator.pid)));
  EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("worker       started  ", worker.pid)));
  EXPECT_THAT(out_.str(), HasSubstr("node n-1 (box)"));
  EXPECT_EQ(ReadAll(State("coordinator.log")), "coordinator listening\n");
  EXPECT_TRUE(std::filesystem::is_directory(State("coordinator")));
  EXPECT_TRUE(std::filesystem::is_directory(State("worker")));

  // Idempotent: nothing new is started.
  out_.str("");
  ASSERT_EQ(Up(), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("coordinator  running  ", coordinator.pid)));
  EXPECT_EQ(ReadDaemon(State("worker.pid")).pid, worker.pid);

  out_.str("");
  EXPECT_EQ(RunLocalStatus(global_, options_, console_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("NODE  HOSTNAME  STATE  CPUS  GPUS\nn-1   box       READY  3/3   0/0\n"));

  out_.str("");
  ASSERT_EQ(RunLocalDown(global_, options_, console_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("worker       stopped  ", worker.pid)));
  EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("coordinator  stopped  ", coordinator.pid)));
  EXPECT_FALSE(ProcessRunning(coordinator.pid));
  EXPECT_FALSE(ProcessRunning(worker.pid));
  EXPECT_FALSE(std::filesystem::exists(State("coordinator.pid")));
  EXPECT_FALSE(std::filesystem::exists(State("worker.pid")));

  out_.str("");
  ASSERT_EQ(RunLocalDown(global_, options_, console_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("worker       not running"));
  EXPECT_EQ(RunLocalStatus(global_, options_, console_), kExitError);
  EXPECT_EQ(err_.str(), "ringmaster: the local cluster is not running; start it with `ringmaster local up`\n");
}

TEST_F(LocalClusterTest, MetricsAddressAndDataRootsReachTheDaemons) {
  options_.metrics_listen = "127.0.0.1:9500";
  options_.data_roots = {"/data/a", "/data/b"};
  ASSERT_EQ(Up(), kExitOk) << err_.str();
  EXPECT_THAT(Args("coordinator"), HasSubstr(" --metrics-listen 127.0.0.1:9500\n"));
  EXPECT_THAT(Args("worker"),
              HasSubstr(" --metrics-listen 127.0.0.1:0 --data-roots /data/a,/data/b\n"));
  ASSERT_EQ(RunLocalDown(global_, options_, console_), kExitOk);
  std::filesystem::remove(options_.bin_dir + "/coordinator.args");
  std::filesystem::remove(options_.bin_dir + "/worker.args");
  // Empty: neither serves /metrics (an empty argument each).
  options_.metrics_listen = "";
  options_.data_roots = {};
  ASSERT_EQ(Up(), kExitOk) << err_.str();
  EXPECT_THAT(Args("coordinator"), HasSubstr(" --metrics-listen \n"));
  EXPECT_THAT(Args("worker"), HasSubstr("127.0.0.1 --metrics-listen \n"));
}

TEST_F(LocalClusterTest, CoordinatorThatExitsIsReportedWithItsLastLogLine) {
  Daemon("coordinator", "echo starting\necho 'cannot listen on 127.0.0.1:50051: address in use' >&2\nexit 1\n");
  global_.coordinator = ClosedAddress();  // nothing answers health checks
  EXPECT_EQ(Up(), kExitError);
  EXPECT_EQ(err_.str(), absl::StrCat("ringmaster: the coordinator exited with status 1: cannot listen on "
                                     "127.0.0.1:50051: address in use (log: ",
                                     State("coordinator.log"), ")\n"));
  EXPECT_FALSE(std::filesystem::exists(State("coordinator.pid")));
  EXPECT_FALSE(std::filesystem::exists(options_.bin_dir + "/worker.args"));  // never started
}

TEST_F(LocalClusterTest, WorkerFailureStopsTheCoordinatorItStarted) {
  Daemon("worker", "echo 'worker: no session yet' >&2\nexit 1\n");
  fake_.service().script().list_nodes.clear_nodes();  // it never registers
  EXPECT_EQ(Up(), kExitError);
  EXPECT_EQ(err_.str(), absl::StrCat("ringmaster: the worker exited with status 1: worker: no session yet (log: ",
                                     State("worker.log"), ")\n"));
  EXPECT_FALSE(ReadDaemon(State("coordinator.pid")).running);
  EXPECT_FALSE(std::filesystem::exists(State("coordinator.pid")));
}

TEST_F(LocalClusterTest, WorkerThatNeverRegistersTimesOut) {
  fake_.service().script().list_nodes.clear_nodes();
  options_.startup_timeout = absl::Milliseconds(500);
  EXPECT_EQ(Up(), kExitError);
  EXPECT_EQ(err_.str(), absl::StrCat("ringmaster: the worker did not register with the coordinator within 500ms: "
                                     "worker registered (log: ",
                                     State("worker.log"), ")\n"));
  EXPECT_FALSE(std::filesystem::exists(State("worker.pid")));
}

TEST_F(LocalClusterTest, DownKillsADaemonThatIgnoresSigterm) {
  Daemon("worker", "trap '' TERM\nexec sleep 300\n");
  ASSERT_EQ(Up(), kExitOk) << err_.str();
  const pid_t worker = ReadDaemon(State("worker.pid")).pid;
  // `up` returns once the node is READY, which the fake says at once: wait
  // until the script has set its trap and become `sleep`.
  const absl::Time limit = absl::Now() + absl::Seconds(10);
  while (ReadAll(absl::StrCat("/proc/", worker, "/cmdline")).rfind("sleep", 0) != 0 && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  options_.stop_grace = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  ASSERT_EQ(RunLocalDown(global_, options_, console_), kExitOk);
  EXPECT_FALSE(ProcessRunning(worker));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
}

TEST_F(LocalClusterTest, MissingBinariesAndNonLocalAddresses) {
  options_.bin_dir = root_ + "/empty";
  EXPECT_EQ(Up(), kExitError);
  EXPECT_EQ(err_.str(), absl::StrCat("ringmaster: cannot find ringmaster-coordinator (looked for ", root_,
                                     "/empty/ringmaster-coordinator); pass --bin-dir\n"));
  err_.str("");
  global_.coordinator = "coordinator.example.com:50051";
  EXPECT_EQ(Up(), kExitUsage);
  EXPECT_EQ(err_.str(),
            "ringmaster: local: --coordinator must be an address on this machine (127.0.0.1:PORT), got "
            "\"coordinator.example.com:50051\"\n");
}

TEST_F(LocalClusterTest, BinariesFoundInABazelBinLayout) {
  std::filesystem::create_directories(root_ + "/bin/client");
  std::filesystem::create_directories(root_ + "/bin/coordinator");
  WriteScript(root_ + "/bin/coordinator/ringmaster-coordinator", "exit 0\n");
  LocalOptions options;
  options.self_exe = root_ + "/bin/client/ringmaster";
  auto found = FindDaemonBinary(options, "coordinator", "ringmaster-coordinator");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, root_ + "/bin/coordinator/ringmaster-coordinator");
  // Next to the CLI wins (an installed layout).
  WriteScript(root_ + "/bin/client/ringmaster-coordinator", "exit 0\n");
  EXPECT_EQ(*FindDaemonBinary(options, "coordinator", "ringmaster-coordinator"),
            root_ + "/bin/client/ringmaster-coordinator");
}

}  // namespace
}  // namespace ringmaster::client
