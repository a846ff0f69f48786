// CoordinatorSession (and LogPusher) against an in-process fake NodeService:
// registration, heartbeats, StartRanks/StopRanks running real /bin/sh
// "trainers", exit reports, logs, progress, reconnection after a coordinator
// restart, re-registration for an unknown session.
#include "worker/coordinator_session.h"

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/fake_node_service.h"
#include "worker/health_checks.h"
#include "worker/log_pusher.h"
#include "worker/log_shipper.h"
#include "worker/node_credential.h"
#include "worker/paths.h"
#include "worker/process_control.h"
#include "worker/process_supervisor.h"
#include "common/proto_time.h"
#include "worker/rank_launcher.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using ::testing::ElementsAre;
using testing::FakeCoordinator;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitUntil;
using testing::WriteScript;

// The fake trainer: says hello, keeps its rank context, then behaves as
// $MODE says (from StartRanks.env): "exit3" for rank 1, otherwise sleeps.
// Its rank is its working directory's (rank-<r>).
constexpr char kTrainer[] = R"(
rank=${PWD##*rank-}
echo "rank $rank starting with $*"
cp "$2" "$PWD/context.txt"
if [ "$MODE" = exit3 ] && [ "$rank" = 1 ]; then echo "boom" >&2; exit 3; fi
exec sleep 60
)";

v1::CoordinatorMessage StartOrder(const std::string& job, int64_t generation, std::vector<int32_t> ranks,
                                  const std::string& mode = "sleep") {
  v1::CoordinatorMessage message;
  v1::StartRanks* start = message.mutable_start();
  start->set_job_id(job);
  start->set_generation(generation);
  start->mutable_placement()->set_generation(generation);
  start->mutable_placement()->set_world_size(static_cast<int32_t>(ranks.size()));
  for (int32_t r : ranks) {
    v1::RankAssignment* a = start->mutable_placement()->add_ranks();
    a->set_global_rank(r);
    a->set_local_rank(r);
    start->add_global_ranks(r);
  }
  start->mutable_spec()->set_name("tiny");
  (*start->mutable_env())["MODE"] = mode;
  return message;
}

v1::StopRanks StopOrder(const std::string& job, int64_t generation, absl::Duration grace) {
  v1::StopRanks stop;
  stop.set_job_id(job);
  stop.set_generation(generation);
  *stop.mutable_grace_period() = ToProtoDuration(grace);
  stop.set_reason("test");
  return stop;
}

class SessionTest : public ::testing::Test {
 protected:
  SessionTest()
      : coordinator_(std::make_unique<FakeCoordinator>()),
        shipper_(Clock::Real(), ShipperOptions()),
        supervisor_(&control_, Clock::Real(), [this](const RankExit& exit) {
          shipper_.Finish(exit.job_id, exit.generation, exit.global_rank);
          session_->ReportExit(exit);
        }) {
    RankLauncherOptions launcher_options;
    launcher_options.state_dir = dir_.path();
    launcher_options.trainer_path = WriteScript(dir_.Join("trainer.sh"), kTrainer);
    launcher_options.agent_socket = AgentSocketPath(dir_.path());
    launcher_options.node_env = {"PATH=/usr/bin:/bin"};
    launcher_ = std::make_unique<RankLauncher>(&supervisor_, &shipper_, launcher_options);

    backoff_.initial = absl::Milliseconds(50);
    backoff_.max = absl::Milliseconds(200);
    channel_ = CoordinatorChannel(coordinator_->address(), backoff_, nullptr, "", &credential_);
    MakeSession(Clock::Real(), backoff_);
  }

  ~SessionTest() override {
    supervisor_.Shutdown(absl::ZeroDuration());
    // On the fake clock, a drain deadline would never come: none.
    session_->Stop(clock_ == &fake_clock_ ? absl::ZeroDuration() : absl::Milliseconds(500));
  }

  // A session (not started) on `clock`, retrying after `retry`'s delays.
  void MakeSession(Clock* clock, RetryPolicy retry) {
    clock_ = clock;
    CoordinatorSessionOptions options;
    options.node.set_hostname("test-host");
    options.node.set_address("test-host");
    options.node.set_cpu_slots(2);
    options.node.set_worker_version("test");
    options.node_id_path = NodeIdPath(dir_.path());
    options.credential = &credential_;
    options.retry = retry;
    options.rpc_timeout = absl::Seconds(2);
    options.health = health_.get();
    session_ = std::make_unique<CoordinatorSession>(channel_, clock, launcher_.get(), &supervisor_, nullptr, options);
  }

  // The session on fake_clock_, with retries `retry_delay` apart (no jitter):
  // far longer than any wait of the test, so only advancing the clock brings them.
  void UseFakeClock(absl::Duration retry_delay = absl::Minutes(1)) {
    RetryPolicy retry;
    retry.initial = retry.max = retry_delay;
    retry.jitter = 0;
    MakeSession(&fake_clock_, retry);
  }

  static LogShipperOptions ShipperOptions() {
    LogShipperOptions options;
    options.poll_interval = absl::Milliseconds(20);
    return options;
  }

  testing::FakeNodeService& fake() { return coordinator_->service(); }

  // Rank 0 of job j generation 1 runs, the coordinator (on *port) goes away,
  // then the rank exits (SIGTERM): its exit report cannot be delivered.
  void ExitWhileTheCoordinatorIsAway(int* port) {
    session_->Start();
    fake().Send(StartOrder("j", 1, {0}));
    ASSERT_TRUE(WaitUntil([&] { return fake().StartResult("j", 1).has_value(); }));
    *port = coordinator_->port();
    coordinator_.reset();
    ASSERT_TRUE(WaitUntil([&] { return !session_->connected(); }));
    supervisor_.Stop("j", 1, {}, absl::Seconds(5));
    ASSERT_TRUE(WaitUntil([&] { return supervisor_.RunningCount() == 0; }));
  }

  bool WaitForExit(const std::string& job, int32_t rank, v1::ReportRankExitRequest* out = nullptr) {
    return WaitUntil([&] {
      for (const v1::ReportRankExitRequest& e : fake().exits()) {
        if (e.job_id() == job && e.global_rank() == rank) {
          if (out != nullptr) *out = e;
          return true;
        }
      }
      return false;
    });
  }

  FakeClock fake_clock_;
  Clock* clock_ = nullptr;  // the session's
  TempDir dir_;
  NodeCredential credential_{NodeCredentialPath(dir_.path())};
  std::unique_ptr<FakeCoordinator> coordinator_;
  RealProcessControl control_;
  LogShipper shipper_;
  ProcessSupervisor supervisor_;
  std::unique_ptr<RankLauncher> launcher_;
  RetryPolicy backoff_;
  std::shared_ptr<grpc::Channel> channel_;
  std::atomic<int64_t> free_bytes_{int64_t{1} << 40};  // the health checks' fake free space
  std::unique_ptr<HealthChecks> health_;  // null: none
  std::unique_ptr<CoordinatorSession> session_;
};

// Heartbeats every minute of the injected clock: only advancing it brings
// them (in real time the test would time out).
TEST_F(SessionTest, RegistersThenHeartbeatsAtTheCoordinatorsInterval) {
  UseFakeClock();
  fake().heartbeat_interval = absl::Minutes(1);
  fake().lease_duration = absl::Minutes(3);
  session_->Start();
  ASSERT_TRUE(WaitUntil([&] { return fake().heartbeats() >= 1; }));  // the first, right after `open`
  std::vector<v1::RegisterNodeRequest> registrations = fake().registrations();
  ASSERT_EQ(registrations.size(), 1u);
  EXPECT_EQ(registrations[0].node().hostname(), "test-host");
  EXPECT_EQ(registrations[0].node().cpu_slots(), 2);
  EXPECT_EQ(registrations[0].node().node_id(), "");
  EXPECT_EQ(registrations[0].running_ranks_size(), 0);
  std::vector<v1::WorkerMessage> messages = fake().messages();
  ASSERT_TRUE(messages[0].has_open());
  EXPECT_EQ(messages[0].open().node_id(), "node-1");
  EXPECT_EQ(messages[0].open().session_id(), 101);
  EXPECT_TRUE(session_->connected());
  EXPECT_EQ(session_->node_id(), "node-1");
  EXPECT_EQ(ReadFile(NodeIdPath(dir_.path())), "node-1\n");

  // A millisecond short of the interval, no heartbeat is due. A progress
  // report wakes the writer (a due heartbeat would go in its batch), a second
  // one shows the first batch was written whole.
  fake_clock_.Advance(absl::Minutes(1) - absl::Milliseconds(1));
  for (int64_t step : {1, 2}) {
    v1::RankProgress progress;
    progress.set_job_id("j");
    progress.mutable_metrics()->set_step(step);
    session_->ReportProgress(progress);
    ASSERT_TRUE(WaitUntil([&] {
      for (const v1::WorkerMessage& m : fake().messages()) {
        if (m.has_progress() && m.progress().metrics().step() == step) return true;
      }
      return false;
    }));
  }
  EXPECT_EQ(fake().heartbeats(), 1);
  fake_clock_.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(WaitUntil([&] { return fake().heartbeats() == 2; }));
  // Stamped with the injected clock.
  EXPECT_TRUE(fake().HeartbeatWith(
      [&](const v1::Heartbeat& h) { return FromProtoTime(h.time()) == fake_clock_.Now(); }));
  fake_clock_.Advance(absl::Minutes(1));
  ASSERT_TRUE(WaitUntil([&] { return fake().heartbeats() == 3; }));
}

// While a health check fails, heartbeats say why and a StartRanks is refused
// (after a heartbeat saying so); once it passes, ranks start again.
TEST_F(SessionTest, AFailingHealthCheckGoesWithHeartbeatsAndRefusesStarts) {
  HealthCheckOptions checks;
  checks.disk_paths = {dir_.path()};
  checks.min_free_bytes = int64_t{256} << 20;
  free_bytes_ = int64_t{10} << 20;
  health_ = std::make_unique<HealthChecks>(checks, Clock::Real(),
                                           [&](const std::string&) -> absl::StatusOr<int64_t> { return free_bytes_.load(); });
  const std::string failure = health_->Run();
  ASSERT_EQ(failure, "free space: " + dir_.path() + " has 10 MiB available, below --health-min-free-mb 256");
  MakeSession(Clock::Real(), backoff_);
  session_->Start();
  ASSERT_TRUE(WaitUntil([&] { return fake().HeartbeatWith([&](const v1::Heartbeat& h) { return h.health_failure() == failure; }); }));

  fake().Send(StartOrder("j", 1, {0}));
  ASSERT_TRUE(WaitUntil([&] { return fake().StartResult("j", 1).has_value(); }));
  EXPECT_EQ(fake().StartResult("j", 1)->error(), "node not ready: " + failure);
  EXPECT_EQ(fake().StartResult("j", 1)->started_ranks_size(), 0);
  EXPECT_EQ(supervisor_.RunningCount(), 0);
  std::vector<v1::WorkerMessage> messages = fake().messages();
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!messages[i].has_start_result()) continue;
    ASSERT_GT(i, 0u);
    EXPECT_EQ(messages[i - 1].heartbeat().health_failure(), failure);  // said just before
  }

  free_bytes_ = int64_t{1} << 30;
  EXPECT_EQ(health_->Run(), "");
  fake().Send(StartOrder("j", 2, {0}));
  ASSERT_TRUE(WaitUntil([&] { return fake().StartResult("j", 2).has_value(); }));
  EXPECT_EQ(fake().StartResult("j", 2)->error(), "");
  EXPECT_THAT(fake().StartResult("j", 2)->started_ranks(), ElementsAre(0));
}

TEST_F(SessionTest, StartsRanksReportsTheirExitsAndShipsTheirLogs) {
  session_->Start();
  LogPusher pusher(
      channel_, &shipper_, [&] { return session_->node_id(); }, backoff_);
  shipper_.Start();
  pusher.Start();
  ASSERT_TRUE(WaitUntil([&] { return session_->connected(); }));

  fake().Send(StartOrder("j", 1, {0, 1}, "exit3"));
  ASSERT_TRUE(WaitUntil([&] { return fake().StartResult("j", 1).has_value(); }));
  v1::StartRanksResult result = *fake().StartResult("j", 1);
  EXPECT_THAT(result.started_ranks(), ElementsAre(0, 1));
  EXPECT_EQ(result.error(), "");

  v1::ReportRankExitRequest exit1;
  ASSERT_TRUE(WaitForExit("j", 1, &exit1));
  EXPECT_EQ(exit1.node_id(), "node-1");
  EXPECT_EQ(exit1.generation(), 1);
  EXPECT_EQ(exit1.exit_code(), 3);
  EXPECT_EQ(exit1.signal(), 0);
  EXPECT_FALSE(exit1.stopped_by_worker());
  EXPECT_THAT(exit1.stderr_tail(), HasSubstr("boom"));

  // Rank 0 runs, with the trainer contract's rank context, and shows in heartbeats.
  const std::string context = ReadFile(RankWorkDir(dir_.path(), "j", 1, 0) + "/context.txt");
  EXPECT_THAT(context, HasSubstr("\"address\": \"grpc:unix:" + AgentSocketPath(dir_.path()) + "\""));
  EXPECT_THAT(context, HasSubstr("\"job_id\": \"j\""));
  ASSERT_TRUE(WaitUntil([&] {
    return fake().HeartbeatWith([](const v1::Heartbeat& h) {
      return h.running_ranks_size() == 1 && h.running_ranks(0).job_id() == "j" && h.running_ranks(0).global_rank() == 0;
    });
  }));

  v1::CoordinatorMessage stop;
  *stop.mutable_stop() = StopOrder("j", 1, absl::Seconds(5));
  fake().Send(stop);
  v1::ReportRankExitRequest exit0;
  ASSERT_TRUE(WaitForExit("j", 0, &exit0));
  EXPECT_EQ(exit0.signal(), SIGTERM);
  EXPECT_EQ(exit0.exit_code(), -1);
  EXPECT_TRUE(exit0.stopped_by_worker());

  ASSERT_TRUE(WaitUntil([&] {
    for (const v1::LogLine& line : fake().log_lines()) {
      if (line.rank() == 1 && line.text() == "boom") return true;
    }
    return false;
  }));
  bool found = false;
  for (const v1::LogLine& line : fake().log_lines()) {
    found |= line.job_id() == "j" && line.generation() == 1 && line.rank() == 0 &&
             line.text() == "rank 0 starting with --rank-context " + RankWorkDir(dir_.path(), "j", 1, 0) + "/rank.json";
  }
  EXPECT_TRUE(found);
  EXPECT_THAT(fake().log_node_ids(), ::testing::Contains("node-1"));
  shipper_.Close();
  pusher.Stop(absl::Seconds(1));
}

TEST_F(SessionTest, RelaysProgress) {
  session_->Start();
  ASSERT_TRUE(WaitUntil([&] { return session_->connected(); }));
  v1::RankProgress progress;
  progress.set_job_id("j");
  progress.set_generation(2);
  progress.set_global_rank(0);
  progress.mutable_metrics()->set_step(17);
  session_->ReportProgress(progress);
  ASSERT_TRUE(WaitUntil([&] {
    for (const v1::WorkerMessage& m : fake().messages()) {
      if (m.has_progress() && m.progress().metrics().step() == 17) return true;
    }
    return false;
  }));
}

TEST_F(SessionTest, ReconnectsAfterTheCoordinatorRestartsAndReportsWhatStillRuns) {
  session_->Start();
  fake().Send(StartOrder("j", 4, {0}));
  ASSERT_TRUE(WaitUntil([&] { return fake().StartResult("j", 4).has_value(); }));
  const int port = coordinator_->port();

  coordinator_->Shutdown();
  ASSERT_TRUE(WaitUntil([&] { return !session_->connected(); }));
  coordinator_.reset();
  coordinator_ = std::make_unique<FakeCoordinator>(port);
  ASSERT_EQ(coordinator_->port(), port);

  ASSERT_TRUE(WaitUntil([&] { return !fake().registrations().empty() && fake().heartbeats() >= 1; }));
  v1::RegisterNodeRequest again = fake().registrations()[0];
  EXPECT_EQ(again.node().node_id(), "node-1");
  ASSERT_EQ(again.running_ranks_size(), 1);
  EXPECT_EQ(again.running_ranks(0).job_id(), "j");
  EXPECT_EQ(again.running_ranks(0).generation(), 4);
  EXPECT_EQ(again.running_ranks(0).global_rank(), 0);
  EXPECT_GT(again.running_ranks(0).pid(), 0);
  EXPECT_EQ(session_->sessions_opened(), 2);
}

TEST_F(SessionTest, AnExitWhileTheCoordinatorIsAwayIsReportedWhenItReturns) {
  int port = 0;
  ASSERT_NO_FATAL_FAILURE(ExitWhileTheCoordinatorIsAway(&port));
  coordinator_ = std::make_unique<FakeCoordinator>(port);
  v1::ReportRankExitRequest exit;
  ASSERT_TRUE(WaitForExit("j", 0, &exit));
  EXPECT_EQ(exit.signal(), SIGTERM);
  EXPECT_TRUE(WaitUntil([&] { return session_->pending_exits() == 0; }));
}

// A rank whose exit is not reported yet when the worker registers again is
// listed as running: a restarted coordinator that lost track of it would
// otherwise restart its generation. Its exit report follows.
TEST_F(SessionTest, AnUnreportedExitIsListedAsRunningWhenRegisteringAgain) {
  int port = 0;
  ASSERT_NO_FATAL_FAILURE(ExitWhileTheCoordinatorIsAway(&port));
  coordinator_ = std::make_unique<FakeCoordinator>(port, /*refuse_exits=*/true);
  ASSERT_TRUE(WaitUntil([&] { return !fake().registrations().empty(); }));
  const v1::RegisterNodeRequest again = fake().registrations()[0];
  ASSERT_EQ(again.running_ranks_size(), 1);
  EXPECT_EQ(again.running_ranks(0).job_id(), "j");
  EXPECT_EQ(again.running_ranks(0).generation(), 1);
  EXPECT_EQ(again.running_ranks(0).global_rank(), 0);
  EXPECT_GT(again.running_ranks(0).pid(), 0);
  EXPECT_TRUE(fake().exits().empty());
  fake().RefuseExits(false);
  v1::ReportRankExitRequest exit;
  ASSERT_TRUE(WaitForExit("j", 0, &exit));
  EXPECT_EQ(exit.signal(), SIGTERM);
}

// The session the coordinator does not know ends; the worker registers again
// after the backoff, a minute on the injected clock: only advancing it brings
// the registration (in real time the test would time out).
TEST_F(SessionTest, RegistersAgainWhenTheCoordinatorDoesNotKnowTheSession) {
  UseFakeClock(absl::Minutes(1));
  fake().RejectNextSession(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "session 101 is not current"));
  session_->Start();
  ASSERT_TRUE(WaitUntil([&] { return fake().registrations().size() == 1 && !session_->connected(); }));
  ASSERT_TRUE(fake_clock_.AwaitSleepers(1));  // in its backoff
  EXPECT_EQ(fake().registrations().size(), 1u);
  // The sleeper seen may be another thread, and the backoff's deadline may be
  // taken after an advance: advance a backoff's worth at a time until the
  // session is open again and heartbeating.
  ASSERT_TRUE(WaitUntil([&] {
    if (fake().heartbeats() >= 1) return true;
    fake_clock_.Advance(absl::Minutes(1));
    return false;
  }));
  EXPECT_EQ(fake().registrations().size(), 2u);
  EXPECT_EQ(fake().registrations()[1].node().node_id(), "node-1");
  EXPECT_EQ(session_->sessions_opened(), 2);
}

// An exit report the coordinator could not take is sent again after the
// backoff on the injected clock, and the delay resets once one is delivered.
TEST_F(SessionTest, AnExitReportIsRetriedAfterTheBackoffOnTheInjectedClock) {
  UseFakeClock(absl::Minutes(1));
  fake().RefuseExits(true);
  session_->Start();
  fake().Send(StartOrder("j", 1, {0, 1}, "exit3"));  // rank 1 exits at once
  ASSERT_TRUE(WaitUntil([&] { return fake().StartResult("j", 1).has_value(); }));
  ASSERT_TRUE(WaitUntil([&] { return fake().refused_exits() >= 1; }));
  fake().RefuseExits(false);
  ASSERT_TRUE(fake_clock_.AwaitSleepers(2));  // the writer, and the exit reporter in its backoff
  EXPECT_TRUE(fake().exits().empty());
  EXPECT_EQ(session_->pending_exits(), 1u);
  fake_clock_.Advance(absl::Minutes(1));
  ASSERT_TRUE(WaitForExit("j", 1));
  EXPECT_EQ(fake().refused_exits(), 1);
  EXPECT_TRUE(WaitUntil([&] { return session_->pending_exits() == 0; }));
}

TEST_F(SessionTest, StopOrdersInTheRegisterAnswerAreCarriedOut) {
  session_->Start();
  fake().Send(StartOrder("j", 2, {0}));
  ASSERT_TRUE(WaitUntil([&] { return fake().StartResult("j", 2).has_value(); }));
  const int port = coordinator_->port();
  coordinator_.reset();
  coordinator_ = std::make_unique<FakeCoordinator>(port);
  fake().StopOnRegister({StopOrder("j", 2, absl::Seconds(5))});  // the restarted coordinator ended generation 2
  v1::ReportRankExitRequest exit;
  ASSERT_TRUE(WaitForExit("j", 0, &exit));
  EXPECT_TRUE(exit.stopped_by_worker());
  EXPECT_EQ(exit.generation(), 2);
}

// The credential the coordinator issues at the first registration is kept
// (0600) and goes with every call after it: the session, exit reports, logs.
TEST_F(SessionTest, TheIssuedCredentialIsKeptAndSentWithEveryLaterCall) {
  session_->Start();
  LogPusher pusher(
      channel_, &shipper_, [&] { return session_->node_id(); }, backoff_);
  shipper_.Start();
  pusher.Start();
  ASSERT_TRUE(WaitUntil([&] { return session_->connected(); }));
  fake().Send(StartOrder("j", 1, {0, 1}, "exit3"));
  ASSERT_TRUE(WaitForExit("j", 1));
  ASSERT_TRUE(WaitUntil([&] { return !fake().log_lines().empty(); }));

  const std::string issued = fake().issued_credential;
  EXPECT_EQ(credential_.Get(), issued);
  EXPECT_EQ(ReadFile(NodeCredentialPath(dir_.path())), issued + "\n");
  struct stat st;
  ASSERT_EQ(stat(NodeCredentialPath(dir_.path()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::vector<std::pair<std::string, std::string>> calls = fake().credentials();
  ASSERT_GE(calls.size(), 4u);
  EXPECT_EQ(calls[0], std::make_pair(std::string("Register"), std::string()));
  std::set<std::string> methods;
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].second, issued) << calls[i].first;
    methods.insert(calls[i].first);
  }
  EXPECT_EQ(methods, (std::set<std::string>{"Session", "ReportRankExit", "PushLogs"}));
  shipper_.Close();
  pusher.Stop(absl::Seconds(1));
}

// A restarted worker presents the credential it kept (and its node id), and
// keeps it: the coordinator issues none when one is presented.
TEST_F(SessionTest, ARestartedWorkerPresentsItsKeptCredential) {
  const std::string kept(64, 'a');
  {
    NodeCredential earlier(NodeCredentialPath(dir_.path()));
    ASSERT_TRUE(earlier.Set(kept).ok());
  }
  std::ofstream(NodeIdPath(dir_.path())) << "node-7\n";
  ASSERT_TRUE(credential_.Load().ok());
  session_ = std::make_unique<CoordinatorSession>(channel_, Clock::Real(), launcher_.get(), &supervisor_, nullptr, [&] {
    CoordinatorSessionOptions options;
    options.node.set_hostname("test-host");
    options.node_id_path = NodeIdPath(dir_.path());
    options.credential = &credential_;
    options.retry = backoff_;
    return options;
  }());
  session_->Start();
  ASSERT_TRUE(WaitUntil([&] { return fake().heartbeats() >= 1; }));
  ASSERT_FALSE(fake().registrations().empty());
  EXPECT_EQ(fake().registrations()[0].node().node_id(), "node-7");
  for (const auto& [method, credential] : fake().credentials()) EXPECT_EQ(credential, kept) << method;
  EXPECT_EQ(credential_.Get(), kept);
}

}  // namespace
}  // namespace ringmaster::worker
