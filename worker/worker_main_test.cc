// The ringmaster-worker binary end to end, against an in-process fake
// coordinator: it registers, runs the ranks it is told to run, serves
// /metrics, and on SIGTERM stops its ranks (SIGKILL after the grace period),
// reports their exits and exits 0 with nothing left running.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "worker/testing/fake_node_service.h"
#include "worker/testing/test_util.h"

extern char** environ;

namespace ringmaster::worker {
namespace {

using testing::FakeCoordinator;
using ::testing::HasSubstr;
using testing::ProcessAlive;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitUntil;
using testing::WriteScript;

class WorkerMainTest : public ::testing::Test {
 protected:
  ~WorkerMainTest() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  void StartWorker(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"worker/ringmaster-worker",
                                     "--coordinator",
                                     coordinator_.address(),
                                     "--state-dir",
                                     dir_.Join("state"),
                                     "--metrics-listen",
                                     "127.0.0.1:0",
                                     "--heartbeat-interval",
                                     "50ms",
                                     "--reconnect-initial-backoff",
                                     "0.05",  // a bare number is seconds
                                     "--reconnect-max-backoff",
                                     "200ms",
                                     "--log-file",
                                     dir_.Join("worker.log")};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  }

  // Waits for the worker to exit; its exit status, or -1 on timeout.
  int WaitWorker(absl::Duration timeout) {
    int status = 0;
    if (!WaitUntil([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout)) return -1;
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  TempDir dir_;
  FakeCoordinator coordinator_;
  pid_t pid_ = 0;
};

TEST_F(WorkerMainTest, RunsRanksServesMetricsAndStopsCleanlyOnSigterm) {
  const std::string trainer = WriteScript(dir_.Join("trainer.sh"),
                                          "echo $$ > \"$PWD/pid\"\n"
                                          "if [ \"${PWD##*rank-}\" = 1 ]; then trap '' TERM; fi\n"
                                          "while :; do sleep 0.05; done");
  StartWorker({"--trainer", trainer, "--cpu-slots", "2", "--stop-grace-period", "0.5", "--label", "rack=a3"});
  ASSERT_TRUE(WaitUntil([&] { return coordinator_.service().heartbeats() >= 1; })) << ReadFile(dir_.Join("worker.log"));
  v1::RegisterNodeRequest registration = coordinator_.service().registrations()[0];
  EXPECT_EQ(registration.node().cpu_slots(), 2);
  EXPECT_EQ(registration.node().labels().at("rack"), "a3");
  EXPECT_FALSE(registration.node().hostname().empty());

  v1::CoordinatorMessage start;
  start.mutable_start()->set_job_id("j");
  start.mutable_start()->set_generation(1);
  start.mutable_start()->mutable_placement()->set_world_size(2);
  for (int r = 0; r < 2; ++r) {
    v1::RankAssignment* a = start.mutable_start()->mutable_placement()->add_ranks();
    a->set_global_rank(r);
    a->set_local_rank(r);
    start.mutable_start()->add_global_ranks(r);
  }
  coordinator_.service().Send(start);
  ASSERT_TRUE(WaitUntil([&] { return coordinator_.service().StartResult("j", 1).has_value(); }));
  EXPECT_EQ(coordinator_.service().StartResult("j", 1)->started_ranks_size(), 2);
  std::vector<long> rank_pids;
  for (int r = 0; r < 2; ++r) {
    const std::string pid_file = dir_.Join(absl::StrCat("state/ranks/j/gen-1/rank-", r, "/pid"));
    ASSERT_TRUE(WaitUntil([&] { return !ReadFile(pid_file).empty(); }));
    rank_pids.push_back(std::stol(ReadFile(pid_file)));
  }

  std::smatch match;
  const std::string log = ReadFile(dir_.Join("worker.log"));
  ASSERT_TRUE(std::regex_search(log, match, std::regex("metrics on http://127\\.0\\.0\\.1:(\\d+)/metrics"))) << log;
  httplib::Client http("127.0.0.1", std::stoi(match[1]));
  httplib::Result scrape = http.Get("/metrics");
  ASSERT_TRUE(scrape) << "no answer from /metrics";
  EXPECT_THAT(scrape->body, ::testing::ContainsRegex("ringmaster_worker_ranks_running\\{node=\"[^\"]+\"\\} 2"));
  EXPECT_THAT(scrape->body, ::testing::ContainsRegex("ringmaster_worker_cpu_slots\\{node=\"[^\"]+\"\\} 2"));

  const absl::Time sigterm = absl::Now();
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(WaitWorker(absl::Seconds(20)), 0) << ReadFile(dir_.Join("worker.log"));
  EXPECT_GE(absl::Now() - sigterm, absl::Milliseconds(500));  // rank 1 ignored SIGTERM for the grace period
  for (long pid : rank_pids) EXPECT_FALSE(ProcessAlive(pid)) << pid;
  std::vector<v1::ReportRankExitRequest> exits = coordinator_.service().exits();
  ASSERT_EQ(exits.size(), 2u);
  for (const v1::ReportRankExitRequest& e : exits) {
    EXPECT_TRUE(e.stopped_by_worker());
    EXPECT_EQ(e.signal(), e.global_rank() == 1 ? SIGKILL : SIGTERM);
  }
  EXPECT_THAT(ReadFile(dir_.Join("worker.log")), HasSubstr("worker stopped"));
  EXPECT_FALSE(testing::FileExists(dir_.Join("state/agent.sock")));
}

TEST_F(WorkerMainTest, ExitsNonZeroWithOneClearLineWhenTheTrainerCannotBeFound) {
  StartWorker({"--trainer", dir_.Join("missing-trainer")});
  EXPECT_EQ(WaitWorker(absl::Seconds(20)), 1);
  EXPECT_THAT(ReadFile(dir_.Join("worker.log")), HasSubstr("--trainer " + dir_.Join("missing-trainer")));
}

TEST_F(WorkerMainTest, TwoWorkersCannotShareAStateDirectory) {
  const std::string trainer = WriteScript(dir_.Join("trainer.sh"), "exit 0");
  StartWorker({"--trainer", trainer});
  ASSERT_TRUE(WaitUntil([&] { return coordinator_.service().heartbeats() >= 1; }));
  const pid_t first = pid_;
  StartWorker({"--trainer", trainer});
  EXPECT_EQ(WaitWorker(absl::Seconds(20)), 1);
  EXPECT_THAT(ReadFile(dir_.Join("worker.log")), HasSubstr("another worker uses"));
  pid_ = first;
  kill(pid_, SIGTERM);
  EXPECT_EQ(WaitWorker(absl::Seconds(20)), 0);
}

}  // namespace
}  // namespace ringmaster::worker
