// ProcessSupervisor's rejoining with FakeProcessControl and FakeClock: a
// survivor of a restart parks, its exit reported, and the next generation's
// start adopts its process; everything else ends as before.
#include <signal.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/process_supervisor.h"
#include "worker/testing/supervisor_fixture.h"

namespace ringmaster::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class RejoinTest : public testing::FakeSupervisorTest {
 protected:
  // Rejoinable ranks: the same program and environment in every generation.
  static std::vector<RankLaunch> RejoinLaunches(const std::string& job, int64_t generation,
                                                std::vector<int32_t> ranks) {
    std::vector<RankLaunch> out = Launches(job, generation, ranks);
    for (RankLaunch& launch : out) {
      const int32_t rank = launch.global_rank;
      launch.process.env = {"PATH=/usr/bin"};
      launch.process.cwd = absl::StrCat("/ranks/gen-", generation, "/rank-", rank);
      launch.process.log_path = absl::StrCat("/logs/gen-", generation, "/rank-", rank, ".log");
      launch.secret = absl::StrCat("secret-", generation);
      launch.rejoin_context = ContextPath(generation, rank);
    }
    return out;
  }
  static std::string ContextPath(int64_t generation, int32_t rank) {
    return absl::StrCat("/ranks/gen-", generation, "/rank-", rank, "/rank.json");
  }

  // Calls AwaitRejoin; the answer lands in answers().
  void Await(const std::string& job, int64_t generation, int32_t rank) {
    supervisor_.AwaitRejoin(job, generation, rank, [this](absl::StatusOr<std::string> answer) {
      std::lock_guard<std::mutex> lock(mu_);
      answers_.push_back(std::move(answer));
    });
  }
  std::vector<absl::StatusOr<std::string>> answers() {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_;
  }
  int SignalsTo(int64_t pid) {
    int n = 0;
    for (const auto& signal : control_.signals()) n += signal.pgid == pid ? 1 : 0;
    return n;
  }
  bool WaitAnswers(size_t n) {
    return control_.WaitFor([&] { return answers().size() >= n; }, absl::Seconds(10));
  }

  std::vector<absl::StatusOr<std::string>> answers_;
};

TEST_F(RejoinTest, ASurvivorParksAndTheNextGenerationAdoptsItsProcess) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0, 1})).status.ok());
  const int64_t survivor = control_.PidOf(0, 1);
  control_.Exit(control_.PidOf(1, 1), -1, SIGKILL);  // a peer dies
  ASSERT_TRUE(WaitExits(1));
  Await("j", 1, 0);  // its world broke
  EXPECT_TRUE(answers().empty());
  // The coordinator restarts the job: the survivor parks, its exit reported
  // (its slot goes), not a signal sent.
  EXPECT_EQ(supervisor_.Stop("j", 1, {}, absl::Seconds(10), /*dump_state=*/true, /*restarting=*/true), 1);
  ASSERT_TRUE(WaitExits(2));
  EXPECT_EQ(exits()[1].global_rank, 0);
  EXPECT_EQ(exits()[1].pid, survivor);
  EXPECT_TRUE(exits()[1].stopped_by_worker);
  EXPECT_EQ(SignalsTo(survivor), 0);
  EXPECT_EQ(supervisor_.CheckCaller("j", 1, 0).state, CallerState::kOver);

  StartOutcome next = supervisor_.Start(RejoinLaunches("j", 2, {0, 1}));
  ASSERT_TRUE(next.status.ok()) << next.status;
  EXPECT_THAT(next.started, ElementsAre(0, 1));
  ASSERT_EQ(next.adopted.size(), 1u);
  EXPECT_EQ(next.adopted.at(0), "/logs/gen-1/rank-0.log");  // its output goes on there
  EXPECT_EQ(control_.spawned().size(), 3u);  // rank 1 alone is a new process
  ASSERT_TRUE(WaitAnswers(1));
  ASSERT_TRUE(answers()[0].ok()) << answers()[0].status();
  EXPECT_EQ(*answers()[0], ContextPath(2, 0));
  EXPECT_EQ(SignalsTo(survivor), 0);
  // It is rank 0 of generation 2 now: fenced, identified and reported so.
  EXPECT_EQ(supervisor_.CheckCaller("j", 2, 0).state, CallerState::kCurrent);
  EXPECT_TRUE(supervisor_.HoldsSecret("j", 2, "secret-2"));
  control_.Exit(survivor, 0);
  ASSERT_TRUE(WaitExits(3));
  EXPECT_EQ(exits()[2].pid, survivor);
  EXPECT_EQ(exits()[2].generation, 2);
  EXPECT_FALSE(exits()[2].stopped_by_worker);
}

TEST_F(RejoinTest, TheRestartingStopMayComeFirst) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0})).status.ok());
  supervisor_.Stop("j", 1, {}, absl::Seconds(10), true, true);
  EXPECT_THAT(control_.signals(), IsEmpty());
  EXPECT_TRUE(exits().empty());  // not parked until it asks
  Await("j", 1, 0);
  ASSERT_TRUE(WaitExits(1));
  EXPECT_TRUE(exits()[0].stopped_by_worker);
  EXPECT_EQ(supervisor_.Start(RejoinLaunches("j", 2, {0})).adopted.size(), 1u);
  ASSERT_TRUE(WaitAnswers(1));
  EXPECT_TRUE(answers()[0].ok());
}

// The coordinator fences a report the survivor sent before the restart with
// a stop naming its rank: the restart's stop still governs it.
TEST_F(RejoinTest, AStopNamingTheRankAfterTheRestartsStopLeavesItToThatOne) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0, 1})).status.ok());
  const int64_t survivor = control_.PidOf(0, 1);
  control_.Exit(control_.PidOf(1, 1), -1, SIGKILL);
  supervisor_.Stop("j", 1, {}, absl::Seconds(10), true, true);
  EXPECT_EQ(supervisor_.Stop("j", 1, {0}, absl::Seconds(30)), 0);  // "generation 1 of job j is over"
  EXPECT_EQ(SignalsTo(survivor), 0);
  Await("j", 1, 0);
  EXPECT_EQ(supervisor_.Start(RejoinLaunches("j", 2, {0, 1})).adopted.size(), 1u);
  ASSERT_TRUE(WaitAnswers(1));
  EXPECT_TRUE(answers()[0].ok());
  // A stop of the whole generation (a cancel) still stops a parked rank.
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("k", 1, {0})).status.ok());
  Await("k", 1, 0);
  supervisor_.Stop("k", 1, {}, absl::Seconds(10), true, true);
  const int64_t parked = control_.PidOf(0, 1);
  EXPECT_EQ(supervisor_.Stop("k", 1, {}, absl::Seconds(10)), 1);
  // (Once it is reaped, its group gets a SIGKILL too: not counted here.)
  EXPECT_EQ(CountSignals(parked, SIGTERM), 1);
}

TEST_F(RejoinTest, AStartWaitsForASurvivorOnItsWayToTheCall) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0, 1})).status.ok());
  control_.Exit(control_.PidOf(1, 1), -1, SIGKILL);
  supervisor_.Stop("j", 1, {}, absl::Seconds(10), true, true);
  // The next generation's start comes before the survivor's call (it was
  // finishing a step): the start waits for it, then adopts it.
  StartOutcome next;
  std::atomic<bool> started{false};
  std::thread start([&] {
    next = supervisor_.Start(RejoinLaunches("j", 2, {0, 1}));
    started = true;
  });
  EXPECT_TRUE(clock_.AwaitSleepers(1));  // it waits (the reaper waits in real time)
  EXPECT_FALSE(started);
  EXPECT_EQ(control_.spawned().size(), 2u);
  Await("j", 1, 0);
  start.join();
  ASSERT_TRUE(next.status.ok()) << next.status;
  EXPECT_EQ(next.adopted.size(), 1u);
  EXPECT_EQ(control_.spawned().size(), 3u);
  ASSERT_TRUE(WaitAnswers(1));
  EXPECT_TRUE(answers()[0].ok());
}

TEST_F(RejoinTest, AStartWaitsForASurvivorAtMostTheParkWait) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0, 1})).status.ok());
  const int64_t survivor = control_.PidOf(0, 1);
  control_.Exit(control_.PidOf(1, 1), -1, SIGKILL);
  supervisor_.Stop("j", 1, {}, absl::Seconds(10), true, true);
  StartOutcome next;
  std::thread start([&] { next = supervisor_.Start(RejoinLaunches("j", 2, {0, 1})); });
  EXPECT_TRUE(clock_.AwaitSleepers(1));
  clock_.Advance(absl::Seconds(5));  // park_wait: the survivor never called
  start.join();
  ASSERT_TRUE(next.status.ok()) << next.status;
  EXPECT_TRUE(next.adopted.empty());
  EXPECT_THAT(next.started, ElementsAre(0, 1));
  EXPECT_EQ(control_.spawned().size(), 4u);  // both ranks are new processes
  ASSERT_TRUE(control_.WaitFor([&] { return CountSignals(survivor, SIGTERM) > 0; }, absl::Seconds(10)));
}

TEST_F(RejoinTest, ARankThatDoesNotAskInTimeIsDumpedAndStoppedAsBefore) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0})).status.ok());
  const int64_t pid = control_.PidOf(0, 1);
  supervisor_.Stop("j", 1, {}, absl::Seconds(10), /*dump_state=*/true, /*restarting=*/true);
  clock_.Advance(absl::Seconds(4));
  EXPECT_FALSE(control_.WaitFor([&] { return !control_.signals().empty(); }, absl::Milliseconds(100)));
  clock_.Advance(absl::Seconds(1));  // park_wait (5 s) is over
  ASSERT_TRUE(control_.WaitFor([&] { return CountSignals(pid, SIGTERM) > 0; }, absl::Seconds(10)));
  ASSERT_TRUE(WaitExits(1));
  EXPECT_EQ(exits()[0].signal, SIGTERM);
  // A call now is refused at once: it is being stopped.
  Await("j", 1, 0);
  ASSERT_TRUE(WaitAnswers(1));
  EXPECT_EQ(answers()[0].status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(RejoinTest, ACallThatNoRestartFollowsIsRefusedAfterTheWait) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0})).status.ok());
  Await("j", 1, 0);
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(WaitAnswers(1));
  EXPECT_EQ(answers()[0].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(answers()[0].status().message()), HasSubstr("no restart of generation 1"));
  EXPECT_THAT(control_.signals(), IsEmpty());  // it exits by itself; its exit is a failure as before
  control_.Exit(control_.PidOf(0, 1), 1);
  ASSERT_TRUE(WaitExits(1));
  EXPECT_EQ(exits()[0].exit_code, 1);
  EXPECT_FALSE(exits()[0].stopped_by_worker);
}

TEST_F(RejoinTest, AStopThatIsNotARestartRefusesTheCallAndStops) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0})).status.ok());
  Await("j", 1, 0);
  supervisor_.Stop("j", 1, {}, absl::Seconds(10));  // cancelled
  ASSERT_TRUE(WaitAnswers(1));
  EXPECT_EQ(answers()[0].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountSignals(control_.PidOf(0, 1), SIGTERM), 1);
}

TEST_F(RejoinTest, AParkedRankNoStartAdoptsIsStoppedAndReportedOnce) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0, 1})).status.ok());
  const int64_t pid0 = control_.PidOf(0, 1), pid1 = control_.PidOf(1, 1);
  Await("j", 1, 0);
  Await("j", 1, 1);
  supervisor_.Stop("j", 1, {}, absl::Seconds(10), true, true);
  ASSERT_TRUE(WaitExits(2));
  // The next generation puts one rank here, and not as a rejoinable one
  // (another program): nothing is adopted, both parked processes are stopped.
  std::vector<RankLaunch> other = RejoinLaunches("j", 2, {0});
  other[0].rejoin_context.clear();
  EXPECT_TRUE(supervisor_.Start(other).adopted.empty());
  ASSERT_TRUE(WaitAnswers(2));
  for (const auto& answer : answers()) EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountSignals(pid0, SIGTERM), 1);
  EXPECT_EQ(CountSignals(pid1, SIGTERM), 1);
  ASSERT_TRUE(control_.WaitFor([&] { return supervisor_.RunningCount() == 1; }, absl::Seconds(10)));
  EXPECT_EQ(exits().size(), 2u);  // their exits were reported when they parked
}

TEST_F(RejoinTest, AParkedRankIsStoppedWhenNoStartComes) {
  ASSERT_TRUE(supervisor_.Start(RejoinLaunches("j", 1, {0})).status.ok());
  Await("j", 1, 0);
  supervisor_.Stop("j", 1, {}, absl::Seconds(10), true, true);
  ASSERT_TRUE(WaitExits(1));
  clock_.Advance(absl::Seconds(60));  // adopt_wait
  ASSERT_TRUE(WaitAnswers(1));
  EXPECT_EQ(answers()[0].status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(control_.WaitFor([&] { return supervisor_.RunningCount() == 0; }, absl::Seconds(10)));
  EXPECT_EQ(exits().size(), 1u);
}

TEST_F(RejoinTest, ARankNotStartedRejoinableIsStoppedAtOnce) {
  ASSERT_TRUE(supervisor_.Start(Launches("j", 1, {0})).status.ok());
  Await("j", 1, 0);
  ASSERT_TRUE(WaitAnswers(1));
  EXPECT_THAT(std::string(answers()[0].status().message()), HasSubstr("not started rejoinable"));
  supervisor_.Stop("j", 1, {}, absl::Seconds(10), true, true);
  EXPECT_EQ(CountSignals(control_.PidOf(0, 1), SIGTERM), 1);
}

}  // namespace
}  // namespace ringmaster::worker
