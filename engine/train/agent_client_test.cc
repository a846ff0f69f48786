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
    setenv("RINGMASTER_AGENT", socket_.c_str(), 1);
    setenv("RINGMASTER_JOB_ID", "j-7", 1);
    setenv("RINGMASTER_GENERATION", "3", 1);
  }
  void TearDown() override {
    unsetenv("RINGMASTER_AGENT");
    server_->Shutdown();
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
  unsetenv("RINGMASTER_AGENT");
  auto client = AgentClient::FromEnv(0, absl::Milliseconds(10));
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(*client, nullptr);
}

TEST_F(AgentClientTest, BadGenerationIsRejectedByName) {
  setenv("RINGMASTER_GENERATION", "three", 1);
  auto client = AgentClient::FromEnv(0, absl::Milliseconds(10));
  EXPECT_EQ(client.status().message(), "RINGMASTER_GENERATION: expected an integer, got \"three\"");
}

TEST_F(AgentClientTest, ReportsTheLatestStepAndLearnsToStop) {
  auto client = AgentClient::FromEnv(2, absl::Milliseconds(20)).value();
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
    auto client = AgentClient::FromEnv(0, absl::Milliseconds(10)).value();
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
  auto client = AgentClient::FromEnv(0, absl::Milliseconds(10)).value();
  ASSERT_TRUE(client->CommitCheckpoint(10, *path, 0, 1).ok());
  client->ReportStep(Step(10));  // from here the next checkpoint's write is timed
  ASSERT_TRUE(client->CommitCheckpoint(10, *path, 0, 1).ok());
  auto commits = worker_.commits();
  ASSERT_EQ(commits.size(), 2u);
  EXPECT_LT(commits[0].write_seconds(), 0);  // no step reported before it: unknown
  EXPECT_GE(commits[1].write_seconds(), 0);
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
  auto client = AgentClient::FromEnv(0, absl::Milliseconds(10)).value();
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
  auto client = AgentClient::FromEnv(0, absl::Milliseconds(10)).value();
  ASSERT_TRUE(client->CommitCheckpoint(20, *new_path, 0, 1).ok());
  EXPECT_FALSE(std::filesystem::exists(*old_path));
  EXPECT_TRUE(std::filesystem::exists(*new_path));
  EXPECT_TRUE(std::filesystem::exists(elsewhere)) << "a path outside the checkpoint directory was removed";
  auto listed = ListCheckpoints(dir);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].step, 20);
}

}  // namespace
}  // namespace ringmaster::engine
