// AgentServer on a Unix socket: forwarding to a fake coordinator
// (RendezvousService, CheckpointService) with the scope filled and fenced,
// deadlines and cancellation carried over, ReportMetrics to metrics and
// progress.
#include "worker/agent_server.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/agent_service.grpc.pb.h"
#include "proto/checkpoint_service.grpc.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"
#include "worker/testing/fake_process_control.h"
#include "worker/process_supervisor.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::WaitUntil;

// The coordinator's side, recording what reaches it.
class FakeRendezvous final : public v1::RendezvousService::Service, public v1::CheckpointService::Service {
 public:
  grpc::Status KvSet(grpc::ServerContext*, const v1::KvSetRequest* request, v1::KvSetResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    scopes_.push_back(request->scope());
    kv_[request->key()] = request->value();
    return grpc::Status::OK;
  }
  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest* request, v1::KvGetResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    scopes_.push_back(request->scope());
    auto it = kv_.find(request->key());
    response->set_found(it != kv_.end());
    if (it != kv_.end()) response->set_value(it->second);
    return grpc::Status::OK;
  }
  grpc::Status KvAdd(grpc::ServerContext*, const v1::KvAddRequest* request, v1::KvAddResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    scopes_.push_back(request->scope());
    counters_[request->key()] += request->delta();
    response->set_value(counters_[request->key()]);
    return grpc::Status::OK;
  }
  // Never finds the keys: waits until the call's deadline or cancellation.
  grpc::Status KvWait(grpc::ServerContext* context, const v1::KvWaitRequest* request, v1::KvWaitResponse*) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      scopes_.push_back(request->scope());
      waiting_ = true;
      wait_had_deadline_ = context->deadline() != std::chrono::system_clock::time_point::max();
    }
    while (!context->IsCancelled() && std::chrono::system_clock::now() < context->deadline()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::lock_guard<std::mutex> lock(mu_);
    wait_cancelled_ = context->IsCancelled();
    waiting_ = false;
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "key 'k' was not set in time");
  }
  grpc::Status GetLatestCheckpoint(grpc::ServerContext*, const v1::GetLatestCheckpointRequest* request,
                                   v1::GetLatestCheckpointResponse* response) override {
    response->mutable_checkpoint()->set_job_id(request->job_id());
    response->mutable_checkpoint()->set_step(700);
    return grpc::Status::OK;
  }
  grpc::Status Commit(grpc::ServerContext*, const v1::CommitCheckpointRequest* request,
                      v1::CommitCheckpointResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    commits_.push_back(*request);
    if (request->files().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "files: at least one");
    response->mutable_checkpoint()->set_step(request->step());
    return grpc::Status::OK;
  }

  std::vector<v1::RendezvousScope> scopes() {
    std::lock_guard<std::mutex> lock(mu_);
    return scopes_;
  }
  std::vector<v1::CommitCheckpointRequest> commits() {
    std::lock_guard<std::mutex> lock(mu_);
    return commits_;
  }
  bool waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  bool wait_cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return wait_cancelled_;
  }
  bool wait_had_deadline() {
    std::lock_guard<std::mutex> lock(mu_);
    return wait_had_deadline_;
  }

 private:
  std::mutex mu_;
  std::vector<v1::RendezvousScope> scopes_;
  std::map<std::string, std::string> kv_;
  std::map<std::string, int64_t> counters_;
  std::vector<v1::CommitCheckpointRequest> commits_;
  bool waiting_ = false;
  bool wait_cancelled_ = false;
  bool wait_had_deadline_ = false;
};

constexpr char kSecret[] = "generation-2-secret";

v1::RendezvousScope Scope(const std::string& job, int64_t generation, int32_t rank) {
  v1::RendezvousScope scope;
  scope.set_job_id(job);
  scope.set_generation(generation);
  scope.set_rank(rank);
  return scope;
}

class AgentServerTest : public ::testing::Test {
 protected:
  AgentServerTest()
      : supervisor_(&control_, Clock::Real(), [this](const RankExit& exit) {
          std::lock_guard<std::mutex> lock(mu_);
          exits_.push_back(exit);
        }) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &coordinator_port_);
    builder.RegisterService(static_cast<v1::RendezvousService::Service*>(&coordinator_));
    builder.RegisterService(static_cast<v1::CheckpointService::Service*>(&coordinator_));
    coordinator_server_ = builder.BuildAndStart();
    metrics_ = *WorkerMetrics::Create(&registry_, "node-a");
    // Job "j" runs generation 2, ranks 0 and 1, on this node.
    std::vector<RankLaunch> launches;
    for (int32_t rank : {0, 1}) {
      RankLaunch launch;
      launch.job_id = "j";
      launch.generation = 2;
      launch.global_rank = rank;
      launch.process.path = "/fake/trainer";
      launch.process.argv = {"/fake/trainer"};
      launch.secret = kSecret;
      launches.push_back(launch);
    }
    EXPECT_TRUE(supervisor_.Start(launches).status.ok());
  }

  ~AgentServerTest() override {
    if (agent_ != nullptr) agent_->Stop();
    supervisor_.Shutdown(absl::ZeroDuration());
    coordinator_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  }

  void StartAgent(const std::string& coordinator_address = "") {
    auto channel = grpc::CreateChannel(
        coordinator_address.empty() ? absl::StrCat("127.0.0.1:", coordinator_port_) : coordinator_address,
        grpc::InsecureChannelCredentials());
    agent_ = std::make_unique<AgentServer>(
        &supervisor_, metrics_.get(),
        [this](const v1::RankProgress& p) {
          std::lock_guard<std::mutex> lock(mu_);
          progress_.push_back(p);
        },
        channel, AgentServerOptions{dir_.Join("agent.sock")});
    ASSERT_TRUE(agent_->Start().ok());
    // The job's trainers present the generation's secret, as AgentClient does.
    auto trainer = MakeChannel(agent_->target(), grpc::InsecureChannelCredentials(), grpc::ChannelArguments(),
                               {{kRankSecretHeader, kSecret}});
    rendezvous_ = v1::RendezvousService::NewStub(trainer);
    checkpoints_ = v1::CheckpointService::NewStub(trainer);
    agent_stub_ = v1::AgentService::NewStub(trainer);
    // Another local process: it reaches the socket, but knows no secret.
    auto stranger = grpc::CreateChannel(agent_->target(), grpc::InsecureChannelCredentials());
    stranger_checkpoints_ = v1::CheckpointService::NewStub(stranger);
    stranger_agent_ = v1::AgentService::NewStub(stranger);
  }

  static std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::Seconds(10)) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return context;
  }

  TempDir dir_;
  FakeRendezvous coordinator_;
  int coordinator_port_ = 0;
  std::unique_ptr<grpc::Server> coordinator_server_;
  FakeProcessControl control_;
  ProcessSupervisor supervisor_;
  MetricsRegistry registry_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<AgentServer> agent_;
  std::unique_ptr<v1::RendezvousService::Stub> rendezvous_;
  std::unique_ptr<v1::CheckpointService::Stub> checkpoints_;
  std::unique_ptr<v1::AgentService::Stub> agent_stub_;
  std::unique_ptr<v1::CheckpointService::Stub> stranger_checkpoints_;
  std::unique_ptr<v1::AgentService::Stub> stranger_agent_;
  std::mutex mu_;
  std::vector<v1::RankProgress> progress_;
  std::vector<RankExit> exits_;
};

// Store::Add through the worker (barriers count arrivals with it).
TEST_F(AgentServerTest, ForwardsKvAddToTheCoordinator) {
  StartAgent();
  v1::KvAddRequest add;
  *add.mutable_scope() = Scope("j", 2, 1);
  add.set_key("barrier/0");
  add.set_delta(1);
  v1::KvAddResponse response;
  grpc::Status status = rendezvous_->KvAdd(Context().get(), add, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.value(), 1);
  status = rendezvous_->KvAdd(Context().get(), add, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.value(), 2);
  std::vector<v1::RendezvousScope> scopes = coordinator_.scopes();
  ASSERT_EQ(scopes.size(), 2u);
  EXPECT_EQ(scopes[1].job_id(), "j");
  EXPECT_EQ(scopes[1].rank(), 1);
}

TEST_F(AgentServerTest, ForwardsKvSetAndKvGetToTheCoordinator) {
  StartAgent();
  v1::KvSetRequest set;
  *set.mutable_scope() = Scope("j", 2, 0);
  set.set_key("gloo/world/0");
  set.set_value("address-of-rank-0");
  v1::KvSetResponse set_response;
  grpc::Status status = rendezvous_->KvSet(Context().get(), set, &set_response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  v1::KvGetRequest get;
  *get.mutable_scope() = Scope("j", 2, 1);
  get.set_key("gloo/world/0");
  v1::KvGetResponse got;
  status = rendezvous_->KvGet(Context().get(), get, &got);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(got.found());
  EXPECT_EQ(got.value(), "address-of-rank-0");

  std::vector<v1::RendezvousScope> scopes = coordinator_.scopes();
  ASSERT_EQ(scopes.size(), 2u);
  EXPECT_EQ(scopes[0].job_id(), "j");
  EXPECT_EQ(scopes[0].generation(), 2);
  EXPECT_EQ(scopes[1].rank(), 1);
}

TEST_F(AgentServerTest, FillsAnEmptyJobAndGeneration) {
  StartAgent();
  v1::KvSetRequest set;
  *set.mutable_scope() = Scope("", 0, 1);
  set.set_key("k");
  v1::KvSetResponse response;
  ASSERT_TRUE(rendezvous_->KvSet(Context().get(), set, &response).ok());
  ASSERT_EQ(coordinator_.scopes().size(), 1u);
  EXPECT_EQ(coordinator_.scopes()[0].job_id(), "j");
  EXPECT_EQ(coordinator_.scopes()[0].generation(), 2);
  EXPECT_EQ(coordinator_.scopes()[0].rank(), 1);
}

TEST_F(AgentServerTest, RejectsAnOlderGenerationWithoutAskingTheCoordinator) {
  StartAgent();
  v1::KvGetRequest get;
  *get.mutable_scope() = Scope("j", 1, 0);
  get.set_key("k");
  v1::KvGetResponse response;
  grpc::Status status = rendezvous_->KvGet(Context().get(), get, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), "generation 1 is over; current is 2");

  v1::KvSetRequest stranger;
  *stranger.mutable_scope() = Scope("j", 2, 7);
  v1::KvSetResponse set_response;
  status = rendezvous_->KvSet(Context().get(), stranger, &set_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("does not run on this node"));

  v1::CommitCheckpointRequest commit;
  commit.set_job_id("j");
  commit.set_generation(1);
  v1::CommitCheckpointResponse commit_response;
  EXPECT_EQ(checkpoints_->Commit(Context().get(), commit, &commit_response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(coordinator_.scopes().empty());
  EXPECT_TRUE(coordinator_.commits().empty());
}

TEST_F(AgentServerTest, ForwardsCommitsAndPassesTheCoordinatorsErrorsThrough) {
  StartAgent();
  v1::CommitCheckpointRequest commit;
  commit.set_job_id("j");
  commit.set_generation(2);
  commit.set_rank(0);
  commit.set_step(100);
  commit.add_files()->set_path("model.safetensors");
  v1::CommitCheckpointResponse response;
  grpc::Status status = checkpoints_->Commit(Context().get(), commit, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.checkpoint().step(), 100);

  commit.clear_files();
  status = checkpoints_->Commit(Context().get(), commit, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "files: at least one");
}

TEST_F(AgentServerTest, ATrainerReadsTheLatestCheckpointOfItsOwnJobOnly) {
  StartAgent();
  v1::GetLatestCheckpointRequest request;
  v1::GetLatestCheckpointResponse response;
  grpc::Status status = checkpoints_->GetLatestCheckpoint(Context().get(), request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();  // the node's only job, "j"
  EXPECT_EQ(response.checkpoint().job_id(), "j");
  EXPECT_EQ(response.checkpoint().step(), 700);

  request.set_job_id("other");  // another user's job, running elsewhere
  status = checkpoints_->GetLatestCheckpoint(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("job other has no rank on this node"));
}

TEST_F(AgentServerTest, ACallWithoutTheJobsSecretActsForNoRank) {
  StartAgent();
  v1::CommitCheckpointRequest commit;
  commit.set_job_id("j");
  commit.set_generation(2);
  commit.set_rank(0);
  commit.set_step(999999);
  commit.add_files()->set_path("model.safetensors");
  v1::CommitCheckpointResponse committed;
  grpc::Status status = stranger_checkpoints_->Commit(Context().get(), commit, &committed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("not the secret of job j generation 2"));

  v1::ReportDamagedCheckpointRequest damaged;
  damaged.set_job_id("j");
  damaged.set_generation(2);
  damaged.set_rank(0);
  v1::ReportDamagedCheckpointResponse damaged_response;
  status = stranger_checkpoints_->ReportDamaged(Context().get(), damaged, &damaged_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  v1::GetLatestCheckpointRequest latest;
  latest.set_job_id("j");
  v1::GetLatestCheckpointResponse latest_response;
  status = stranger_checkpoints_->GetLatestCheckpoint(Context().get(), latest, &latest_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  v1::ReportMetricsRequest report;
  report.set_job_id("j");
  report.set_generation(2);
  report.set_global_rank(0);
  report.mutable_metrics()->set_step(5);
  v1::ReportMetricsResponse report_response;
  status = stranger_agent_->ReportMetrics(Context().get(), report, &report_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // None of it reached the coordinator or the progress.
  EXPECT_TRUE(coordinator_.commits().empty());
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_TRUE(progress_.empty());
}

// A rank whose generation ended asks to carry on in the next one: the call
// presents the generation's secret and is answered once the next
// generation's start adopts its process (ProcessSupervisor::AwaitRejoin).
TEST_F(AgentServerTest, RejoinIsAnsweredWhenTheNextGenerationAdoptsTheProcess) {
  auto rejoinable = [](int64_t generation) {
    RankLaunch launch;
    launch.job_id = "r";
    launch.generation = generation;
    launch.process.path = "/fake/trainer";
    launch.process.argv = {"/fake/trainer"};
    launch.process.cwd = absl::StrCat("/ranks/gen-", generation, "/rank-0");
    launch.secret = kSecret;
    launch.rejoin_context = absl::StrCat("/ranks/gen-", generation, "/rank-0/rank.json");
    return std::vector<RankLaunch>{launch};
  };
  ASSERT_TRUE(supervisor_.Start(rejoinable(1)).status.ok());
  StartAgent();
  v1::RejoinRequest request;
  request.set_job_id("r");
  request.set_generation(1);
  request.set_global_rank(0);
  v1::RejoinResponse response;
  EXPECT_EQ(stranger_agent_->Rejoin(Context().get(), request, &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::RejoinRequest no_job = request;
  no_job.clear_job_id();
  EXPECT_EQ(agent_stub_->Rejoin(Context().get(), no_job, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::RejoinRequest not_rejoinable = request;
  not_rejoinable.set_job_id("j");
  not_rejoinable.set_generation(2);
  grpc::Status refused = agent_stub_->Rejoin(Context().get(), not_rejoinable, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("not started rejoinable"));

  // The restart's stop, then the call: the process parks (its exit is
  // reported) and the next generation's start adopts it.
  supervisor_.Stop("r", 1, {}, absl::Seconds(10), /*dump_state=*/true, /*restarting=*/true);
  grpc::Status answered;
  std::thread caller([&] { answered = agent_stub_->Rejoin(Context().get(), request, &response); });
  auto parked = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return std::any_of(exits_.begin(), exits_.end(), [](const RankExit& e) { return e.job_id == "r"; });
  };
  const bool did_park = control_.WaitFor(parked, absl::Seconds(10));
  const StartOutcome next = supervisor_.Start(rejoinable(2));
  caller.join();
  ASSERT_TRUE(did_park);
  EXPECT_EQ(next.adopted.size(), 1u);
  ASSERT_TRUE(answered.ok()) << answered.error_message();
  EXPECT_EQ(response.context_path(), "/ranks/gen-2/rank-0/rank.json");

  // A caller that gives up first (no restart came): its call ends with its
  // deadline, and the supervisor drops its answer.
  std::vector<RankLaunch> other = rejoinable(1);
  other[0].job_id = "r2";
  ASSERT_TRUE(supervisor_.Start(other).status.ok());
  request.set_job_id("r2");
  EXPECT_EQ(agent_stub_->Rejoin(Context(absl::Milliseconds(200)).get(), request, &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(AgentServerTest, ACommittedCheckpointsWriteTimeAndSizeReachTheMetrics) {
  StartAgent();
  v1::CommitCheckpointRequest commit;
  commit.set_job_id("j");
  commit.set_generation(2);
  commit.set_rank(0);
  commit.set_step(100);
  commit.set_write_seconds(0.5);
  commit.set_stall_seconds(0.125);
  for (int64_t size : {1000, 24}) {
    v1::CheckpointFile* file = commit.add_files();
    file->set_path(absl::StrCat("f", size));
    file->set_size_bytes(size);
  }
  v1::CommitCheckpointResponse response;
  grpc::Status status = checkpoints_->Commit(Context().get(), commit, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string text = registry_.ExposeText();
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoint_bytes{job=\"j\",node=\"node-a\",rank=\"0\"} 1024"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoint_seconds_sum{job=\"j\",node=\"node-a\",rank=\"0\"} 0.5"));
  EXPECT_THAT(text,
              HasSubstr("ringmaster_rank_checkpoint_stall_seconds_sum{job=\"j\",node=\"node-a\",rank=\"0\"} 0.125"));
  EXPECT_THAT(text, HasSubstr("ringmaster_rank_checkpoints_total{job=\"j\",node=\"node-a\",rank=\"0\"} 1"));
}

TEST_F(AgentServerTest, TheCallersDeadlineAndCancellationReachTheCoordinator) {
  StartAgent();
  v1::KvWaitRequest wait;
  *wait.mutable_scope() = Scope("j", 2, 0);
  wait.add_keys("k");
  v1::KvWaitResponse response;
  const absl::Time start = absl::Now();
  grpc::Status status = rendezvous_->KvWait(Context(absl::Milliseconds(300)).get(), wait, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(coordinator_.wait_had_deadline());

  // A trainer that gives up (or dies) cancels the coordinator's wait.
  grpc::ClientContext context;
  std::thread caller([&] { rendezvous_->KvWait(&context, wait, &response); });
  ASSERT_TRUE(WaitUntil([&] { return coordinator_.waiting(); }));
  context.TryCancel();
  caller.join();
  ASSERT_TRUE(WaitUntil([&] { return !coordinator_.waiting(); }));
  EXPECT_TRUE(coordinator_.wait_cancelled());
}

// A coordinator that is away (restarting) is waited for until the trainer's
// deadline, not failed at once: the call ends DEADLINE_EXCEEDED, never sent.
TEST_F(AgentServerTest, AnUnreachableCoordinatorIsWaitedForUntilTheDeadline) {
  StartAgent("127.0.0.1:1");
  v1::KvSetRequest set;
  *set.mutable_scope() = Scope("j", 2, 0);
  set.set_key("k");
  v1::KvSetResponse response;
  EXPECT_EQ(rendezvous_->KvSet(Context(absl::Milliseconds(500)).get(), set, &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(AgentServerTest, ReportMetricsFeedsMetricsAndProgressAndTellsOldRanksToStop) {
  StartAgent();
  v1::ReportMetricsRequest report;
  report.set_job_id("j");
  report.set_generation(2);
  report.set_global_rank(1);
  report.mutable_metrics()->set_step(42);
  report.mutable_metrics()->set_loss(0.5);
  v1::ReportMetricsResponse response;
  grpc::Status status = agent_stub_->ReportMetrics(Context().get(), report, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(response.stop());
  EXPECT_THAT(registry_.ExposeText(), HasSubstr("ringmaster_rank_step{job=\"j\",node=\"node-a\",rank=\"1\"} 42"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_EQ(progress_.size(), 1u);
    EXPECT_EQ(progress_[0].job_id(), "j");
    EXPECT_EQ(progress_[0].generation(), 2);
    EXPECT_EQ(progress_[0].global_rank(), 1);
    EXPECT_EQ(progress_[0].metrics().step(), 42);
  }

  // A drain asks the current generation for a checkpoint; only it hears so.
  EXPECT_FALSE(response.checkpoint());
  EXPECT_FALSE(supervisor_.RequestCheckpoint("j", 1));  // not the current generation
  EXPECT_FALSE(supervisor_.RequestCheckpoint("other", 2));
  ASSERT_TRUE(supervisor_.RequestCheckpoint("j", 2));
  ASSERT_TRUE(agent_stub_->ReportMetrics(Context().get(), report, &response).ok());
  EXPECT_TRUE(response.checkpoint());
  EXPECT_FALSE(response.stop());

  report.set_generation(1);
  ASSERT_TRUE(agent_stub_->ReportMetrics(Context().get(), report, &response).ok());
  EXPECT_TRUE(response.stop());
  EXPECT_FALSE(response.checkpoint());

  report.set_generation(2);
  supervisor_.Stop("j", 2, {1}, absl::Seconds(30));  // being stopped: told to exit
  ASSERT_TRUE(agent_stub_->ReportMetrics(Context().get(), report, &response).ok());
  EXPECT_TRUE(response.stop());

  report.set_job_id("other");
  EXPECT_EQ(agent_stub_->ReportMetrics(Context().get(), report, &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(progress_.size(), 2u);
}

TEST_F(AgentServerTest, TheSocketIsPrivateReplacesAStaleOneAndIsRemovedAtStop) {
  testing::WriteFile(dir_.Join("not-a-socket"), "x");
  AgentServer blocked(&supervisor_, nullptr, nullptr,
                      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
                      AgentServerOptions{dir_.Join("not-a-socket")});
  EXPECT_EQ(blocked.Start().code(), absl::StatusCode::kFailedPrecondition);
  AgentServer too_long(&supervisor_, nullptr, nullptr,
                       grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()),
                       AgentServerOptions{dir_.Join(std::string(120, 'x'))});
  EXPECT_EQ(too_long.Start().code(), absl::StatusCode::kInvalidArgument);

  StartAgent();
  struct stat st;
  ASSERT_EQ(stat(dir_.Join("agent.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  agent_->Stop();
  EXPECT_FALSE(testing::FileExists(dir_.Join("agent.sock")));

  // A socket file left behind by a worker that died is replaced.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", dir_.Join("agent.sock").c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  ASSERT_TRUE(testing::FileExists(dir_.Join("agent.sock")));
  StartAgent();
  v1::KvSetRequest set;
  *set.mutable_scope() = Scope("j", 2, 0);
  v1::KvSetResponse response;
  EXPECT_TRUE(rendezvous_->KvSet(Context().get(), set, &response).ok());
}

}  // namespace
}  // namespace ringmaster::worker
