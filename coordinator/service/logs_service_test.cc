// Logs end to end over real gRPC: a worker pushes its ranks' lines
// (NodeService.PushLogs), a user reads them (JobService.StreamLogs): all of
// them, the tail, one rank, and following until the job ends.
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/store/log_store.h"
#include "common/proto_time.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

class LogsServiceTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    CoordinatorFixture::SetUp();
    worker_ = NewWorker("node-a", 2);
  }
  void TearDown() override {
    worker_.reset();
    CoordinatorFixture::TearDown();
  }
  // A job of 1 node x 2 CPU ranks placed on worker_ (generation 1): what it
  // pushes for that job is stored.
  std::string PlacedJob() {
    v1::StartRanks start;
    return StartCpuJob(worker_.get(), &start);
  }
  v1::LogLine Line(const std::string& job_id, int32_t rank, int64_t sequence, const std::string& text) {
    v1::LogLine line;
    line.set_job_id(job_id);
    line.set_generation(1);
    line.set_rank(rank);
    line.set_sequence(sequence);
    *line.mutable_time() = ToProtoTime(absl::FromUnixSeconds(1'800'000'000) + absl::Milliseconds(10 * sequence) +
                                       absl::Microseconds(rank));
    line.set_text(text);
    return line;
  }
  // One PushLogs stream carrying `chunks`, as `worker` (default worker_).
  grpc::Status Push(const std::vector<v1::LogChunk>& chunks, const FakeWorker* worker = nullptr) {
    auto context = (worker != nullptr ? worker : worker_.get())->NodeContext();
    context->AddMetadata("ringmaster-node-id", "n-1");
    v1::PushLogsResponse response;
    auto writer = nodes_->PushLogs(context.get(), &response);
    for (const v1::LogChunk& chunk : chunks) {
      if (!writer->Write(chunk)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  // "[rank r] text" for every line of a StreamLogs call, and its status.
  std::vector<std::string> Read(const v1::StreamLogsRequest& request, grpc::Status* status) {
    auto context = Context();
    auto reader = jobs_->StreamLogs(context.get(), request);
    std::vector<std::string> lines;
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) {
      for (const v1::LogLine& line : chunk.lines())
        lines.push_back(absl::StrCat("[rank ", line.rank(), "] ", line.text()));
    }
    *status = reader->Finish();
    return lines;
  }

  std::unique_ptr<FakeWorker> worker_;
};

TEST_F(LogsServiceTest, PushedLinesComeBackInterleavedByTime) {
  const std::string job_id = PlacedJob();
  v1::LogChunk chunk;
  for (int64_t seq = 1; seq <= 3; ++seq) {
    *chunk.add_lines() = Line(job_id, 0, seq, absl::StrCat("step ", seq));
    *chunk.add_lines() = Line(job_id, 1, seq, absl::StrCat("step ", seq));
  }
  ASSERT_TRUE(Push({chunk}).ok());
  ASSERT_TRUE(Push({chunk}).ok());  // sent again after a broken stream: not stored twice

  v1::StreamLogsRequest request;
  request.set_job_id(job_id);
  request.set_generation(1);
  grpc::Status status;
  EXPECT_EQ(Read(request, &status),
            (std::vector<std::string>{"[rank 0] step 1", "[rank 1] step 1", "[rank 0] step 2", "[rank 1] step 2",
                                      "[rank 0] step 3", "[rank 1] step 3"}));
  EXPECT_TRUE(status.ok()) << status.error_message();

  request.set_rank(1);
  request.set_tail_lines(2);
  EXPECT_EQ(Read(request, &status), (std::vector<std::string>{"[rank 1] step 2", "[rank 1] step 3"}));
  EXPECT_TRUE(status.ok());

  // The files are where the layout says.
  EXPECT_EQ(server_->logs().LineCount(job_id), 6);
  std::ifstream file(absl::StrCat(config_.state_dir, "/logs/", job_id, "/gen-1/rank-1.log"));
  std::string first;
  std::getline(file, first);
  EXPECT_EQ(first, "2027-01-15T08:00:00.010001Z - 1 step 1");

  // A restarted coordinator still has them.
  StopServer();
  StartServer();
  request.clear_rank();
  request.set_tail_lines(1);
  EXPECT_EQ(Read(request, &status), (std::vector<std::string>{"[rank 0] step 3", "[rank 1] step 3"}));
}

TEST_F(LogsServiceTest, FollowStreamsNewLinesAndEndsWithTheJob) {
  const std::string job_id = PlacedJob();
  v1::LogChunk before;
  *before.add_lines() = Line(job_id, 0, 1, "loading data");
  ASSERT_TRUE(Push({before}).ok());

  v1::StreamLogsRequest request;
  request.set_job_id(job_id);  // generation 0: the current one and later ones
  request.set_follow(true);
  auto context = Context();
  auto reader = jobs_->StreamLogs(context.get(), request);
  std::vector<std::string> seen;
  v1::LogChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  for (const auto& line : chunk.lines()) seen.push_back(line.text());
  EXPECT_EQ(seen, std::vector<std::string>{"loading data"});

  v1::LogChunk more;
  *more.add_lines() = Line(job_id, 1, 1, "step 1 loss 2.3");
  ASSERT_TRUE(Push({more}).ok());
  ASSERT_TRUE(reader->Read(&chunk));
  ASSERT_EQ(chunk.lines_size(), 1);
  EXPECT_EQ(chunk.lines(0).text(), "step 1 loss 2.3");
  EXPECT_EQ(chunk.lines(0).rank(), 1);

  v1::CancelJobRequest cancel;
  cancel.set_job_id(job_id);
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(jobs_->CancelJob(Context().get(), cancel, &cancelled).ok());
  v1::LogChunk last;
  *last.add_lines() = Line(job_id, 1, 2, "SIGTERM received");  // within the linger: still sent
  ASSERT_TRUE(Push({last}).ok());
  std::vector<std::string> tail;
  while (reader->Read(&chunk)) {
    for (const auto& line : chunk.lines()) tail.push_back(line.text());
  }
  EXPECT_EQ(tail, std::vector<std::string>{"SIGTERM received"});
  EXPECT_TRUE(reader->Finish().ok());
}

TEST_F(LogsServiceTest, InvalidRequestsAndLines) {
  v1::StreamLogsRequest request;
  request.set_job_id("j-1");
  request.set_tail_lines(-1);
  grpc::Status status;
  Read(request, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "tail_lines: must be >= 0, got -1");

  ASSERT_TRUE(worker_->Register().ok());
  v1::LogChunk bad;
  *bad.add_lines() = Line("../etc", 0, 1, "escape");
  *bad.add_lines() = Line("j-1", -1, 1, "negative rank");
  EXPECT_TRUE(Push({bad}).ok());  // jobs nobody knows: dropped and counted, the stream goes on
  EXPECT_EQ(server_->logs().LineCount("../etc"), 0);
  const std::string metrics = server_->metrics_registry().ExposeText();
  EXPECT_NE(metrics.find("ringmaster_log_lines_total{result=\"invalid\"} 2"), std::string::npos) << metrics;
}

// A node pushes lines of its own ranks only: another node's lines for them
// end the stream with PERMISSION_DENIED, lines without a node credential with
// UNAUTHENTICATED; neither is stored, and the owner's lines still are.
TEST_F(LogsServiceTest, LinesOfRanksNotPlacedOnTheNodeAreRefused) {
  const std::string job_id = PlacedJob();
  auto other = NewWorker("node-b", 2);
  ASSERT_TRUE(other->Register().ok());
  v1::LogChunk forged;
  *forged.add_lines() = Line(job_id, 0, 1, "INJECTED");
  grpc::Status status = Push({forged}, other.get());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_EQ(status.error_message(), absl::StrCat("node ", other->node_id(), " has no rank 0 of job ", job_id,
                                                 " (generation 1): a node acts only for the ranks placed on it"));
  FakeWorker anonymous(channel_, MakeNode("node-c", 0, 1));  // never registered: no credential
  status = Push({forged}, &anonymous);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  // A line of a generation the job never had, from the right node.
  v1::LogChunk future;
  *future.add_lines() = Line(job_id, 1, 1, "generation 2");
  future.mutable_lines(0)->set_generation(2);
  EXPECT_EQ(Push({future}).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(server_->logs().LineCount(job_id), 0);

  v1::LogChunk own;
  *own.add_lines() = Line(job_id, 1, 1, "step 1");
  ASSERT_TRUE(Push({own}).ok());
  v1::StreamLogsRequest request;
  request.set_job_id(job_id);
  EXPECT_EQ(Read(request, &status), (std::vector<std::string>{"[rank 1] step 1"}));
}

// Shutdown does not wait for its deadline: every open stream (a worker's
// session and log push, a user's watch and log follow) ends at once with
// UNAVAILABLE, which clients answer by reconnecting.
TEST_F(LogsServiceTest, ShutdownEndsEveryOpenStreamWithUnavailable) {
  config_.shutdown_timeout = absl::Seconds(30);
  StopServer();
  StartServer();
  auto worker = NewWorker("node-a", 2);
  v1::StartRanks order;
  const std::string job_id = StartCpuJob(worker.get(), &order);

  auto push_context = worker->NodeContext();
  v1::PushLogsResponse pushed;
  auto pusher = nodes_->PushLogs(push_context.get(), &pushed);
  v1::LogChunk chunk;
  *chunk.add_lines() = Line(job_id, 0, 1, "hello");
  ASSERT_TRUE(pusher->Write(chunk));

  v1::StreamLogsRequest follow;
  follow.set_job_id(job_id);
  follow.set_follow(true);
  auto logs_context = Context();
  auto logs = jobs_->StreamLogs(logs_context.get(), follow);
  v1::LogChunk got;
  ASSERT_TRUE(logs->Read(&got));  // "hello": the push was handled

  v1::WatchJobRequest watch;
  watch.set_job_id(job_id);
  auto watch_context = Context();
  auto watcher = jobs_->WatchJob(watch_context.get(), watch);
  v1::WatchJobResponse update;
  ASSERT_TRUE(watcher->Read(&update));

  const absl::Time start = absl::Now();
  StopServer();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  while (logs->Read(&got)) {
  }
  grpc::Status status = logs->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "the coordinator is shutting down");
  while (watcher->Read(&update)) {
  }
  status = watcher->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "the coordinator is shutting down");
  status = worker->Finish(false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "the coordinator is shutting down");
  pusher->WritesDone();
  status = pusher->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "the coordinator is shutting down");
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
