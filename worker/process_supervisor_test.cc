// ProcessSupervisor with the real ProcessControl, on /bin/sh scripts: exits
// and their codes, SIGTERM then SIGKILL, process groups, reaping, logs.
#include "worker/process_supervisor.h"

#include <signal.h>
#include <sys/wait.h>

#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/process_control.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;
using testing::ProcessAlive;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitUntil;
using testing::WriteScript;

class ExitRecorder {
 public:
  void Record(const RankExit& exit) {
    std::lock_guard<std::mutex> lock(mu_);
    exits_.push_back(exit);
  }
  std::vector<RankExit> exits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return exits_;
  }
  size_t size() const { return exits().size(); }
  // The exit of `rank`, or nullptr.
  std::optional<RankExit> Of(int32_t rank) const {
    for (const RankExit& e : exits()) {
      if (e.global_rank == rank) return e;
    }
    return std::nullopt;
  }

 private:
  mutable std::mutex mu_;
  std::vector<RankExit> exits_;
};

class SupervisorTest : public ::testing::Test {
 protected:
  SupervisorTest() : supervisor_(&control_, Clock::Real(), [this](const RankExit& e) { exits_.Record(e); }) {}

  // A rank running `script` (sh), with its log in the temp dir.
  RankLaunch Launch(int32_t rank, const std::string& script, int64_t generation = 1) {
    RankLaunch launch;
    launch.job_id = "job";
    launch.generation = generation;
    launch.global_rank = rank;
    const std::string path = WriteScript(dir_.Join(absl::StrCat("rank", rank, ".sh")), script);
    launch.process.path = path;
    launch.process.argv = {path};
    launch.process.env = {"PATH=/usr/bin:/bin", absl::StrCat("RINGMASTER_RANK=", rank), "OUT=" + dir_.path()};
    launch.process.cwd = dir_.Join(absl::StrCat("work/rank-", rank));
    launch.process.log_path = LogPath(rank);
    return launch;
  }
  std::string LogPath(int32_t rank) { return dir_.Join(absl::StrCat("jobs/job/gen-1/rank-", rank, ".log")); }

  TempDir dir_;
  RealProcessControl control_;
  ExitRecorder exits_;
  ProcessSupervisor supervisor_;
};

TEST_F(SupervisorTest, ReportsEachExitWithItsCode) {
  StartOutcome outcome =
      supervisor_.Start({Launch(0, "exec sleep 30"), Launch(1, "exit 3"), Launch(2, "exec sleep 30")});
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_THAT(outcome.started, ::testing::ElementsAre(0, 1, 2));

  ASSERT_TRUE(WaitUntil([&] { return exits_.size() == 1; }));
  RankExit exit = exits_.exits()[0];
  EXPECT_EQ(exit.job_id, "job");
  EXPECT_EQ(exit.generation, 1);
  EXPECT_EQ(exit.global_rank, 1);
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_EQ(exit.signal, 0);
  EXPECT_FALSE(exit.stopped_by_worker);
  EXPECT_EQ(supervisor_.RunningCount(), 2);

  supervisor_.Shutdown(absl::Seconds(5));
  ASSERT_EQ(exits_.size(), 3u);
  for (int32_t rank : {0, 2}) {
    std::optional<RankExit> e = exits_.Of(rank);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->signal, SIGTERM);
    EXPECT_EQ(e->exit_code, -1);
    EXPECT_TRUE(e->stopped_by_worker);
  }
  for (const RankExit& e : exits_.exits()) {
    EXPECT_FALSE(ProcessAlive(e.pid)) << e.pid;
    errno = 0;
    EXPECT_EQ(waitpid(static_cast<pid_t>(e.pid), nullptr, WNOHANG), -1) << "pid " << e.pid << " was not reaped";
    EXPECT_EQ(errno, ECHILD);
  }
}

TEST_F(SupervisorTest, StopKillsAChildThatIgnoresSigtermAfterTheGrace) {
  const std::string ready = dir_.Join("ready");
  ASSERT_TRUE(
      supervisor_.Start({Launch(0, "trap '' TERM; touch \"$OUT/ready\"; while :; do sleep 0.05; done")}).status.ok());
  ASSERT_TRUE(WaitUntil([&] { return testing::FileExists(ready); }));
  const absl::Duration grace = absl::Milliseconds(400);
  const absl::Time stop_time = absl::Now();
  EXPECT_EQ(supervisor_.Stop("job", 1, {}, grace), 1);
  ASSERT_TRUE(WaitUntil([&] { return exits_.size() == 1; }));
  const absl::Duration took = absl::Now() - stop_time;
  RankExit exit = exits_.exits()[0];
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_TRUE(exit.stopped_by_worker);
  EXPECT_GE(took, grace);
  EXPECT_LT(took, grace + absl::Seconds(3));
  EXPECT_FALSE(ProcessAlive(exit.pid));
}

TEST_F(SupervisorTest, StopSignalsTheWholeProcessGroup) {
  // The rank's shell starts a grandchild and waits for it.
  ASSERT_TRUE(supervisor_.Start({Launch(0, "sleep 60 & echo $! > \"$OUT/grandchild\"; wait")}).status.ok());
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(dir_.Join("grandchild")).empty(); }));
  const long grandchild = std::stol(ReadFile(dir_.Join("grandchild")));
  ASSERT_TRUE(ProcessAlive(grandchild));
  supervisor_.Stop("job", 1, {0}, absl::Seconds(5));
  ASSERT_TRUE(WaitUntil([&] { return exits_.size() == 1; }));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(grandchild); }, absl::Seconds(2)));
}

TEST_F(SupervisorTest, AGroupLeftBehindByAnExitedRankIsKilled) {
  // The rank exits at once, leaving a grandchild that ignores SIGTERM in its group.
  ASSERT_TRUE(supervisor_.Start({Launch(0, "(trap '' TERM; exec sleep 60) & echo $! > \"$OUT/grandchild\"; exit 0")})
                  .status.ok());
  ASSERT_TRUE(WaitUntil([&] { return exits_.size() == 1; }));
  EXPECT_EQ(exits_.exits()[0].exit_code, 0);
  const long grandchild = std::stol(ReadFile(dir_.Join("grandchild")));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(grandchild); }, absl::Seconds(2)));
}

TEST_F(SupervisorTest, CapturesStdoutAndStderrPerRankAndTheTailInTheExit) {
  const std::string script =
      "echo \"out of rank $RINGMASTER_RANK in $(basename \"$PWD\")\"; echo \"err of rank $RINGMASTER_RANK\" >&2; "
      "exit $RINGMASTER_RANK";
  ASSERT_TRUE(supervisor_.Start({Launch(0, script), Launch(1, script)}).status.ok());
  ASSERT_TRUE(WaitUntil([&] { return exits_.size() == 2; }));
  EXPECT_EQ(ReadFile(LogPath(0)), "out of rank 0 in rank-0\nerr of rank 0\n");
  EXPECT_EQ(ReadFile(LogPath(1)), "out of rank 1 in rank-1\nerr of rank 1\n");
  EXPECT_EQ(exits_.Of(1)->exit_code, 1);
  EXPECT_EQ(exits_.Of(1)->log_tail, "out of rank 1 in rank-1\nerr of rank 1\n");
}

TEST_F(SupervisorTest, ARankThatCannotStartIsReportedAndTheOthersRun) {
  RankLaunch missing = Launch(1, "exit 0");
  missing.process.path = dir_.Join("no-such-trainer");
  missing.process.argv = {missing.process.path};
  StartOutcome outcome = supervisor_.Start({Launch(0, "exec sleep 30"), missing});
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("rank 1"));
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("No such file"));
  EXPECT_THAT(outcome.started, ::testing::ElementsAre(0));
  ASSERT_EQ(exits_.size(), 1u);
  EXPECT_EQ(exits_.exits()[0].global_rank, 1);
  EXPECT_EQ(exits_.exits()[0].exit_code, 127);
  EXPECT_EQ(supervisor_.RunningCount(), 1);
}

TEST(SupervisorSignalsTest, ChildrenDoNotInheritTheWorkersBlockedSignals) {
  // The worker blocks SIGINT/SIGTERM in every thread (before its threads
  // start, so the spawner thread too); a rank must not inherit that.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  TempDir dir;
  ExitRecorder exits;
  {
    RealProcessControl control;
    ProcessSupervisor supervisor(&control, Clock::Real(), [&](const RankExit& e) { exits.Record(e); });
    RankLaunch launch;
    launch.job_id = "job";
    launch.generation = 1;
    launch.process.path =
        WriteScript(dir.Join("rank.sh"), "grep SigBlk /proc/self/status > \"$OUT/mask\"; exec sleep 30");
    launch.process.argv = {launch.process.path};
    launch.process.env = {"PATH=/usr/bin:/bin", "OUT=" + dir.path()};
    launch.process.cwd = dir.path();
    launch.process.log_path = dir.Join("rank.log");
    ASSERT_TRUE(supervisor.Start({launch}).status.ok());
    ASSERT_TRUE(WaitUntil([&] { return ReadFile(dir.Join("mask")).find("SigBlk") != std::string::npos; }));
    EXPECT_EQ(ReadFile(dir.Join("mask")), "SigBlk:\t0000000000000000\n");
    supervisor.Shutdown(absl::Seconds(5));
  }
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits.exits()[0].signal, SIGTERM);  // it was not blocked: no SIGKILL needed
}

}  // namespace
}  // namespace ringmaster::worker
