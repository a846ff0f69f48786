// ProcessSupervisor's logic with FakeProcessControl and FakeClock: fencing by
// generation, idempotent starts, grace periods, caller checks, shutdown.
// Rejoining: process_supervisor_rejoin_test.cc.
#include <signal.h>

#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/process_supervisor.h"
#include "worker/testing/fake_process_control.h"
#include "worker/testing/supervisor_fixture.h"

namespace ringmaster::worker {
namespace {

using testing::FakeSupervisorTest;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(FakeSupervisorTest, StartingTheSameGenerationAgainIsIdempotent) {
  StartOutcome first = supervisor_.Start(Launches("j", 2, {0, 1}));
  ASSERT_TRUE(first.status.ok()) << first.status;
  StartOutcome again = supervisor_.Start(Launches("j", 2, {1, 0}));
  ASSERT_TRUE(again.status.ok()) << again.status;
  EXPECT_THAT(again.started, ElementsAre(0, 1));
  EXPECT_EQ(control_.spawned().size(), 2u);
  // A rank that already exited is not started again either.
  control_.Exit(control_.PidOf(0, 2), 0);
  ASSERT_TRUE(WaitExits(1));
  EXPECT_THAT(supervisor_.Start(Launches("j", 2, {0})).started, ElementsAre(0));
  EXPECT_EQ(control_.spawned().size(), 2u);
}

TEST_F(FakeSupervisorTest, AStartForAnOlderGenerationIsRefused) {
  ASSERT_TRUE(supervisor_.Start(Launches("j", 3, {0})).status.ok());
  StartOutcome old = supervisor_.Start(Launches("j", 2, {0}));
  EXPECT_EQ(old.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(old.status.message()), HasSubstr("generation 2 is over"));
  EXPECT_THAT(old.started, IsEmpty());
  EXPECT_EQ(control_.spawned().size(), 1u);
  // Other jobs have their own generations.
  EXPECT_TRUE(supervisor_.Start(Launches("k", 1, {0})).status.ok());
}

TEST_F(FakeSupervisorTest, AStopForAnOlderGenerationIsIgnored) {
  ASSERT_TRUE(supervisor_.Start(Launches("j", 2, {0, 1})).status.ok());
  EXPECT_EQ(supervisor_.Stop("j", 1, {}, absl::Seconds(5)), 0);
  EXPECT_THAT(control_.signals(), IsEmpty());
  EXPECT_EQ(supervisor_.RunningCount(), 2);
  // The current generation's stop, for one rank.
  EXPECT_EQ(supervisor_.Stop("j", 2, {1}, absl::Seconds(5)), 1);
  ASSERT_TRUE(WaitExits(1));
  EXPECT_EQ(exits()[0].global_rank, 1);
  EXPECT_EQ(exits()[0].signal, SIGTERM);
  EXPECT_TRUE(exits()[0].stopped_by_worker);
  EXPECT_EQ(supervisor_.RunningCount(), 1);
}

TEST_F(FakeSupervisorTest, ANewerGenerationSupersedesTheRunningOne) {
  ASSERT_TRUE(supervisor_.Start(Launches("j", 1, {0, 1})).status.ok());
  const int64_t old0 = control_.PidOf(0, 1), old1 = control_.PidOf(1, 1);
  ASSERT_TRUE(supervisor_.Start(Launches("j", 2, {0, 1})).status.ok());
  EXPECT_EQ(CountSignals(old0, SIGTERM), 1);
  EXPECT_EQ(CountSignals(old1, SIGTERM), 1);
  EXPECT_EQ(control_.spawned().size(), 4u);
  ASSERT_TRUE(WaitExits(2));
  for (const RankExit& e : exits()) EXPECT_EQ(e.generation, 1);
  std::vector<RunningRankInfo> running = supervisor_.Running();
  ASSERT_EQ(running.size(), 2u);
  EXPECT_EQ(running[0].generation, 2);
  EXPECT_EQ(running[1].generation, 2);
}

TEST_F(FakeSupervisorTest, SigkillFollowsSigtermOnlyAfterTheGracePeriod) {
  control_.IgnoreSigterm(true);
  ASSERT_TRUE(supervisor_.Start(Launches("j", 1, {0})).status.ok());
  const int64_t pid = control_.PidOf(0, 1);
  supervisor_.Stop("j", 1, {}, absl::Seconds(10));
  EXPECT_EQ(CountSignals(pid, SIGTERM), 1);
  clock_.Advance(absl::Seconds(9));
  // The reaper wakes every 5 ms of real time; give it many rounds.
  EXPECT_FALSE(control_.WaitFor([&] { return CountSignals(pid, SIGKILL) > 0; }, absl::Milliseconds(100)));
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(control_.WaitFor([&] { return CountSignals(pid, SIGKILL) > 0; }, absl::Seconds(10)));
  ASSERT_TRUE(WaitExits(1));
  EXPECT_EQ(exits()[0].signal, SIGKILL);
  EXPECT_TRUE(exits()[0].stopped_by_worker);
}

// A state dump first: SIGUSR1 + SIGCONT, SIGTERM after the dump wait,
// SIGKILL a whole grace period after the SIGTERM.
TEST(FakeSupervisorDumpTest, TheStateDumpComesBeforeSigterm) {
  FakeClock clock;
  FakeProcessControl control;
  control.IgnoreSigterm(true);
  std::mutex mu;
  std::vector<RankExit> exits;
  SupervisorOptions options;
  options.reap_interval = absl::Milliseconds(5);
  options.state_dump_wait = absl::Seconds(2);
  ProcessSupervisor supervisor(
      &control, &clock,
      [&](const RankExit& e) {
        std::lock_guard<std::mutex> lock(mu);
        exits.push_back(e);
      },
      options);
  RankLaunch launch;
  launch.job_id = "j";
  launch.generation = 1;
  launch.process.path = "/fake/trainer";
  launch.process.argv = {"/fake/trainer"};
  launch.process.env = {"RINGMASTER_RANK=0", "RINGMASTER_GENERATION=1"};
  ASSERT_TRUE(supervisor.Start({launch}).status.ok());
  const int64_t pid = control.PidOf(0, 1);
  auto sent = [&](int sig) {
    for (const auto& s : control.signals()) {
      if (s.pgid == pid && s.sig == sig) return true;
    }
    return false;
  };
  supervisor.Stop("j", 1, {}, absl::Seconds(10), /*dump_state=*/true);
  EXPECT_TRUE(sent(SIGUSR1));
  EXPECT_TRUE(sent(SIGCONT));
  EXPECT_FALSE(control.WaitFor([&] { return sent(SIGTERM); }, absl::Milliseconds(100)));
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(control.WaitFor([&] { return sent(SIGTERM); }, absl::Seconds(10)));
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(control.WaitFor([&] { return sent(SIGKILL); }, absl::Milliseconds(100)));
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(control.WaitFor([&] { return sent(SIGKILL); }, absl::Seconds(10)));
  ASSERT_TRUE(control.WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return !exits.empty();
      },
      absl::Seconds(10)));
  supervisor.Shutdown(absl::ZeroDuration());
}

// A stop without dump_state (a cancel, a finished job) is SIGTERM at once, even
// with a state-dump wait configured.
TEST(FakeSupervisorDumpTest, NoStateDumpUnlessTheGenerationFailed) {
  FakeClock clock;
  FakeProcessControl control;
  SupervisorOptions options;
  options.reap_interval = absl::Milliseconds(5);
  options.state_dump_wait = absl::Seconds(2);
  ProcessSupervisor supervisor(&control, &clock, [](const RankExit&) {}, options);
  RankLaunch launch;
  launch.job_id = "j";
  launch.generation = 1;
  launch.process.path = "/fake/trainer";
  launch.process.argv = {"/fake/trainer"};
  launch.process.env = {"RINGMASTER_RANK=0", "RINGMASTER_GENERATION=1"};
  ASSERT_TRUE(supervisor.Start({launch}).status.ok());
  const int64_t pid = control.PidOf(0, 1);
  supervisor.Stop("j", 1, {}, absl::Seconds(10));
  bool usr1 = false, term = false;
  for (const auto& s : control.signals()) {
    if (s.pgid != pid) continue;
    usr1 |= s.sig == SIGUSR1;
    term |= s.sig == SIGTERM;
  }
  EXPECT_FALSE(usr1);
  EXPECT_TRUE(term);
  supervisor.Shutdown(absl::ZeroDuration());
}

TEST_F(FakeSupervisorTest, ASecondStopCanOnlyShortenTheGrace) {
  control_.IgnoreSigterm(true);
  ASSERT_TRUE(supervisor_.Start(Launches("j", 1, {0})).status.ok());
  const int64_t pid = control_.PidOf(0, 1);
  supervisor_.Stop("j", 1, {}, absl::Seconds(60));
  supervisor_.Stop("j", 1, {}, absl::ZeroDuration());
  EXPECT_EQ(CountSignals(pid, SIGTERM), 1);
  EXPECT_GE(CountSignals(pid, SIGKILL), 1);  // and once more for the group after the leader's exit
  ASSERT_TRUE(WaitExits(1));
}

TEST_F(FakeSupervisorTest, AStoppedGenerationCannotBeStartedAgain) {
  ASSERT_TRUE(supervisor_.Start(Launches("j", 4, {0})).status.ok());
  supervisor_.Stop("j", 4, {}, absl::Seconds(1));
  StartOutcome outcome = supervisor_.Start(Launches("j", 4, {1}));
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(outcome.status.message()), HasSubstr("was stopped"));
  // A stop order for a generation never started here fences it too.
  supervisor_.Stop("k", 7, {}, absl::Seconds(1));
  EXPECT_EQ(supervisor_.Start(Launches("k", 6, {0})).status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(supervisor_.Start(Launches("k", 7, {0})).status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(supervisor_.Start(Launches("k", 8, {0})).status.ok());
}

TEST_F(FakeSupervisorTest, ASpawnFailureIsReportedAsAnExit) {
  control_.FailNextSpawn(absl::UnavailableError("fork: out of processes"));
  StartOutcome outcome = supervisor_.Start(Launches("j", 1, {0, 1}));
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(outcome.status.message(), "rank 0: fork: out of processes");
  EXPECT_THAT(outcome.started, ElementsAre(1));
  ASSERT_EQ(exits().size(), 1u);
  EXPECT_EQ(exits()[0].global_rank, 0);
  EXPECT_EQ(exits()[0].exit_code, 127);
  EXPECT_EQ(exits()[0].log_tail, "fork: out of processes");
}

TEST_F(FakeSupervisorTest, MixedJobsInOneStartAreRejected) {
  std::vector<RankLaunch> launches = Launches("j", 1, {0});
  launches.push_back(Launches("k", 1, {1})[0]);
  EXPECT_EQ(supervisor_.Start(launches).status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(supervisor_.Start(Launches("j", 0, {0})).status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(control_.spawned(), IsEmpty());
}

TEST_F(FakeSupervisorTest, CheckCallerFencesAndFillsTheScope) {
  ASSERT_TRUE(supervisor_.Start(Launches("j", 2, {0, 1})).status.ok());
  CallerCheck current = supervisor_.CheckCaller("j", 2, 1);
  EXPECT_EQ(current.state, CallerState::kCurrent);

  CallerCheck filled = supervisor_.CheckCaller("", 0, 0);
  EXPECT_EQ(filled.state, CallerState::kCurrent);
  EXPECT_EQ(filled.job_id, "j");
  EXPECT_EQ(filled.generation, 2);

  CallerCheck old = supervisor_.CheckCaller("j", 1, 0);
  EXPECT_EQ(old.state, CallerState::kOver);
  EXPECT_EQ(old.reason, "generation 1 is over; current is 2");

  EXPECT_EQ(supervisor_.CheckCaller("j", 3, 0).state, CallerState::kUnknown);
  EXPECT_EQ(supervisor_.CheckCaller("j", 2, 5).state, CallerState::kUnknown);
  EXPECT_EQ(supervisor_.CheckCaller("other", 2, 0).state, CallerState::kUnknown);

  supervisor_.Stop("j", 2, {1}, absl::Seconds(1));
  ASSERT_TRUE(WaitExits(1));
  CallerCheck exited = supervisor_.CheckCaller("j", 2, 1);
  EXPECT_EQ(exited.state, CallerState::kOver);

  ASSERT_TRUE(supervisor_.Start(Launches("k", 1, {0})).status.ok());
  CallerCheck ambiguous = supervisor_.CheckCaller("", 0, 0);
  EXPECT_EQ(ambiguous.state, CallerState::kUnknown);
  EXPECT_THAT(ambiguous.reason, HasSubstr("job_id is required"));
}

TEST_F(FakeSupervisorTest, ARankBeingStoppedIsOver) {
  control_.IgnoreSigterm(true);
  ASSERT_TRUE(supervisor_.Start(Launches("j", 1, {0})).status.ok());
  supervisor_.Stop("j", 1, {0}, absl::Seconds(30));
  CallerCheck check = supervisor_.CheckCaller("j", 1, 0);
  EXPECT_EQ(check.state, CallerState::kOver);
  EXPECT_THAT(check.reason, HasSubstr("being stopped"));
  clock_.Advance(absl::Seconds(30));
  ASSERT_TRUE(WaitExits(1));
}

TEST_F(FakeSupervisorTest, ShutdownStopsEverythingAndRefusesNewStarts) {
  control_.IgnoreSigterm(true);
  ASSERT_TRUE(supervisor_.Start(Launches("j", 1, {0, 1})).status.ok());
  supervisor_.Shutdown(absl::ZeroDuration());  // SIGKILL at once; returns once both are reaped
  EXPECT_EQ(exits().size(), 2u);
  EXPECT_THAT(control_.live(), IsEmpty());
  EXPECT_EQ(supervisor_.RunningCount(), 0);
  EXPECT_EQ(supervisor_.Start(Launches("j", 2, {0})).status.code(), absl::StatusCode::kUnavailable);
  supervisor_.Shutdown(absl::ZeroDuration());  // idempotent
}


}  // namespace
}  // namespace ringmaster::worker
