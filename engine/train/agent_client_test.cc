#include "engine/train/agent_client.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "engine/checkpoint/checkpoint.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

// The worker's side of the agent socket, recording what it is sent.
class FakeWorker final : public v1::AgentService::Service, public v1::CheckpointService::Service {
 public:
  grpc::Status ReportMetrics(grpc::ServerContext*, const v1::ReportMetricsRequest* request,
                             v1::ReportMetricsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    reports_.push_back(*request);
    response->set_stop(stop_);
    return grpc::Status::OK;
  }
  grpc::Status Commit(grpc::ServerContext*, const v1::CommitCheckpointRequest* request,
                      v1::CommitCheckpointResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    commits_.push_back(*request);
    for (const std::string& p : prune_) response->add_prune_paths(p);
    return grpc::Status::OK;
  }
  grpc::Status ReportDamaged(grpc::ServerContext*, const v1::ReportDamagedCheckpointRequest* request,
                             v1::ReportDamagedCheckpointResponse*) override {
    std::lock_guard<std::mutex> lock(mu_);
    damaged_.push_back(*request);
    return grpc::Status::OK;
  }
  std::vector<v1::ReportDamagedCheckpointRequest> damaged() {
    std::lock_guard<std::mutex> lock(mu_);
    return damaged_;
  }
  void set_prune(std::vector<std::string> paths) {
    std::lock_guard<std::mutex> lock(mu_);
    prune_ = std::move(paths);
  }
  std::vector<v1::ReportMetricsRequest> reports() {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_;
  }
  std::vector<v1::CommitCheckpointRequest> commits() {
    std::lock_guard<std::mutex> lock(mu_);
    return commits_;
  }
  void set_stop(bool stop) {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = stop;
  }

 private:
  std::mutex mu_;
  std::vector<v1::ReportMetricsRequest> reports_;
  std::vector<v1::CommitCheckpointRequest> commits_;
  std::vector<v1::ReportDamagedCheckpointRequest> damaged_;
  std::vector<std::string> prune_;
  bool stop_ = false;
};

class AgentClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Unix socket paths are limited to 108 bytes; Bazel's TEST_TMPDIR is longer.
    socket_ = "unix:/tmp/ringmaster-agent-test-" + std::to_string(getpid()) + ".sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort(socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(static_cast<v1::AgentService::Service*>(&worker_));
    builder.RegisterService(static_cast<v1::CheckpointService::Service*>(&worker_));
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

  // Rank `rank` of generation 3 of job j-7, started by a worker at socket_.
  v1::RankContext Context(int rank) const {
    v1::RankContext context;
    context.set_job_id("j-7");
    context.set_generation(3);
    context.mutable_rank()->set_global_rank(rank);
    context.set_agent(socket_);
    return context;
  }

  std::string socket_;
  FakeWorker worker_;
  std::unique_ptr<grpc::Server> server_;
};

StepReport Step(int64_t step) {
  StepReport r;
  r.step = step;
  r.total_steps = 100;
  r.loss = 1.0f / step;
  r.samples = 64;
  r.seconds = 0.5;
  r.loss_scale = 1024;
  return r;
}

TEST_F(AgentClientTest, WithoutAWorkerThereIsNoClient) {
  v1::RankContext context = Context(0);
  context.clear_agent();
  EXPECT_EQ(AgentClient::Connect(context, absl::Milliseconds(10)), nullptr);
}

TEST_F(AgentClientTest, ReportsTheLatestStepAndLearnsToStop) {
  auto client = AgentClient::Connect(Context(2), absl::Milliseconds(20));
  ASSERT_NE(client, nullptr);
  EvalReport eval;
  eval.step = 4;
  eval.loss = 0.5;
  eval.accuracy = 0.75;
  client->ReportEval(eval);
  for (int s = 1; s <= 5; ++s) client->ReportStep(Step(s));
  for (int i = 0; i < 500 && (worker_.reports().empty() || worker_.reports().back().metrics().step() != 5); ++i) {
    absl::SleepFor(absl::Milliseconds(10));  // bounded wait for the sender thread
  }
  auto reports = worker_.reports();
  ASSERT_FALSE(reports.empty());
  const v1::ReportMetricsRequest& last = reports.back();
  EXPECT_EQ(last.job_id(), "j-7");
  EXPECT_EQ(last.generation(), 3);
  EXPECT_EQ(last.global_rank(), 2);
  EXPECT_EQ(last.metrics().step(), 5);
  EXPECT_EQ(last.metrics().samples_per_second(), 128);
  EXPECT_EQ(last.metrics().loss_scale(), 1024);
  EXPECT_EQ(last.metrics().eval_accuracy(), 0.75);
  EXPECT_GT(last.metrics().memory_bytes(), 0);  // this process' peak resident memory
  EXPECT_LE(reports.size(), 5u);
  EXPECT_FALSE(client->stop_requested());

  worker_.set_stop(true);
  client->ReportStep(Step(6));
  for (int i = 0; i < 500 && !client->stop_requested(); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(client->stop_requested());
}

// The final evaluation follows the last step's report: it must still reach the worker.
TEST_F(AgentClientTest, AnEvaluationAfterTheLastStepIsReported) {
  {
    auto client = AgentClient::Connect(Context(0), absl::Milliseconds(10));
    client->ReportStep(Step(9));
    for (int i = 0; i < 500 && worker_.reports().empty(); ++i) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_EQ(worker_.reports().size(), 1u);
    EvalReport eval;
    eval.step = 9;
    eval.loss = 0.25;
    eval.accuracy = 0.9;
    client->ReportEval(eval);
  }  // the destructor sends what is pending
  auto reports = worker_.reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports.back().metrics().step(), 9);
  EXPECT_EQ(reports.back().metrics().eval_accuracy(), 0.9);
  EXPECT_EQ(reports.back().metrics().eval_step(), 9);
}

TEST_F(AgentClientTest, CommitsACheckpointWithItsManifest) {
  std::string dir = ::testing::TempDir() + "/ckpt";
  CheckpointContents contents;
  contents.model.emplace_back("w", Tensor::FromVector({2}, {1, 2}));
  contents.state["step"] = "10";
  auto path = WriteCheckpoint(dir, 10, contents, 2);
  ASSERT_TRUE(path.ok()) << path.status();
  auto client = AgentClient::Connect(Context(0), absl::Milliseconds(10));
  ASSERT_TRUE(client->CommitCheckpoint(10, *path, 0, 1).ok());
  client->ReportStep(Step(10));  // from here the next checkpoint's write is timed
  ASSERT_TRUE(client->CommitCheckpoint(10, *path, 0, 1).ok());
  auto commits = worker_.commits();
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_LT(commits[0].write_seconds(), 0);  // no step reported before it: unknown
  EXPECT_GE(commits[1].write_seconds(), 0);
  EXPECT_FALSE(commits[0].has_stall_seconds());  // a stage's commit without times: unknown
  EXPECT_EQ(commits[0].step(), 10);
  EXPECT_EQ(commits[0].path(), *path);
  EXPECT_EQ(commits[0].pipeline_stages(), 1);
  ASSERT_EQ(commits[0].files_size(), 3);  // model, optimizer, state (the manifest lists the others)
  for (const auto& f : commits[0].files()) {
    EXPECT_EQ(f.checksum().algorithm(), v1::FileChecksum::SHA256);
    EXPECT_EQ(f.checksum().hex().size(), 64u) << f.path();
  }
}

CheckpointContents SmallContents(int64_t step) {
  CheckpointContents contents;
  contents.model.emplace_back("w", Tensor::FromVector({2}, {1, 2}));
  contents.state["step"] = std::to_string(step);
  return contents;
}

TEST_F(AgentClientTest, ADamagedCheckpointIsNeverCommitted) {
  std::string dir = ::testing::TempDir() + "/damaged";
  auto path = WriteCheckpoint(dir, 10, SmallContents(10), 0);
  ASSERT_TRUE(path.ok()) << path.status();
  {
    std::FILE* f = std::fopen((*path + "/state.json").c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fputc('#', f);  // the first byte changes, the size does not
    std::fclose(f);
  }
  auto client = AgentClient::Connect(Context(0), absl::Milliseconds(10));
  absl::Status status = client->CommitCheckpoint(10, *path, 0, 1);
  EXPECT_EQ(status, absl::DataLossError(*path + "/state.json: SHA-256 differs from the manifest's"));
  EXPECT_TRUE(worker_.commits().empty());
}

TEST_F(AgentClientTest, RemovesTheCheckpointsTheCoordinatorPruned) {
  std::string dir = ::testing::TempDir() + "/pruned";
  auto old_path = WriteCheckpoint(dir, 10, SmallContents(10), 0);
  auto new_path = WriteCheckpoint(dir, 20, SmallContents(20), 0);
  ASSERT_TRUE(old_path.ok() && new_path.ok());
  const std::string elsewhere = ::testing::TempDir() + "/elsewhere";
  std::filesystem::create_directories(elsewhere);
  worker_.set_prune({*old_path, elsewhere});
  auto client = AgentClient::Connect(Context(0), absl::Milliseconds(10));
  ASSERT_TRUE(client->CommitCheckpoint(20, *new_path, 0, 1).ok());
  EXPECT_FALSE(std::filesystem::exists(*old_path));
  EXPECT_TRUE(std::filesystem::exists(*new_path));
  EXPECT_TRUE(std::filesystem::exists(elsewhere)) << "a path outside the checkpoint directory was removed";
  auto listed = ListCheckpoints(dir);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].step, 20);
}

TEST_F(AgentClientTest, AWholeModelCommitCoversEveryStage) {
  auto path = WriteCheckpoint(::testing::TempDir() + "/whole", 30, SmallContents(30), 0);
  ASSERT_TRUE(path.ok()) << path.status();
  auto client = AgentClient::Connect(Context(0), absl::Milliseconds(10));
  CheckpointReport checkpoint;
  checkpoint.step = 30;
  checkpoint.path = *path;
  checkpoint.write_seconds = 1.5;
  checkpoint.stall_seconds = 0.25;
  ASSERT_TRUE(client->CommitWholeModel(checkpoint, 4).ok());
  auto commits = worker_.commits();
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_TRUE(commits[0].whole_model());
  EXPECT_EQ(commits[0].step(), 30);
  EXPECT_EQ(commits[0].write_seconds(), 1.5);  // the background write's own time
  ASSERT_TRUE(commits[0].has_stall_seconds());
  EXPECT_EQ(commits[0].stall_seconds(), 0.25);
  EXPECT_EQ(commits[0].pipeline_stage(), 0);
  EXPECT_EQ(commits[0].pipeline_stages(), 4);
  EXPECT_EQ(commits[0].job_id(), "j-7");
  EXPECT_EQ(commits[0].generation(), 3);
}

TEST_F(AgentClientTest, ReportsADamagedCheckpointByItsGenerationAndStep) {
  auto client = AgentClient::Connect(Context(1), absl::Milliseconds(10));
  v1::CheckpointInfo checkpoint;
  checkpoint.set_generation(2);
  checkpoint.set_step(40);
  checkpoint.set_path("/ckpt/j-7/gen-2/step-40");
  ASSERT_TRUE(client->ReportDamaged(checkpoint, "model.safetensors: SHA-256 differs").ok());
  auto reports = worker_.damaged();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].job_id(), "j-7");
  EXPECT_EQ(reports[0].generation(), 3);
  EXPECT_EQ(reports[0].rank(), 1);
  EXPECT_EQ(reports[0].checkpoint_generation(), 2);
  EXPECT_EQ(reports[0].checkpoint_step(), 40);
  EXPECT_EQ(reports[0].reason(), "model.safetensors: SHA-256 differs");
}

// Checkpoints live in <job dir>/gen-<g>/step-<n>: a commit in generation 2
// prunes generation 1's checkpoint (and its emptied directory), never another
// job's.
TEST_F(AgentClientTest, PrunesOlderGenerationsOfTheSameJobOnly) {
  const std::string root = ::testing::TempDir() + "/generations";
  auto old_path = WriteCheckpoint(root + "/j-7/gen-1", 10, SmallContents(10), 0);
  auto new_path = WriteCheckpoint(root + "/j-7/gen-2", 20, SmallContents(20), 0);
  auto other_job = WriteCheckpoint(root + "/j-8/gen-1", 10, SmallContents(10), 0);
  ASSERT_TRUE(old_path.ok() && new_path.ok() && other_job.ok());
  worker_.set_prune({*old_path, *other_job});
  auto client = AgentClient::Connect(Context(0), absl::Milliseconds(10));
  CheckpointReport checkpoint;
  checkpoint.step = 20;
  checkpoint.path = *new_path;
  ASSERT_TRUE(client->CommitWholeModel(checkpoint, 1).ok());
  EXPECT_FALSE(std::filesystem::exists(*old_path));
  EXPECT_FALSE(std::filesystem::exists(root + "/j-7/gen-1")) << "the emptied generation directory stays";
  EXPECT_TRUE(std::filesystem::exists(*new_path));
  EXPECT_TRUE(std::filesystem::exists(*other_job)) << "another job's checkpoint was removed";
}

}  // namespace
}  // namespace ringmaster::engine
