// JobService over real gRPC: submit, get, list, cancel, the error codes, and
// WatchJob following a job to its end.
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "coordinator/testing/coordinator_fixture.h"
#include "common/grpc_status.h"
#include "coordinator/testing/test_util.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

using JobServiceTest = CoordinatorFixture;

TEST(GrpcStatusTest, CodesMapOneToOne) {
  for (int code = 0; code <= 16; ++code) {
    const absl::Status s(static_cast<absl::StatusCode>(code), code == 0 ? "" : "why");
    const grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), code);
    EXPECT_EQ(g.error_message(), code == 0 ? "" : "why");
    EXPECT_EQ(FromGrpcStatus(g), s);
  }
}

TEST_F(JobServiceTest, SubmitThenGetThenList) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = MakeSpec(1, 2, v1::ResourceSpec::CPU);
  submit.mutable_spec()->mutable_labels()->insert({"team", "vision"});
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(jobs_->Submit(Context().get(), submit, &submitted).ok());
  EXPECT_EQ(submitted.job().id(), "j-1");
  EXPECT_EQ(submitted.job().state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(submitted.job().spec().resources().cpus_per_rank(), 1);  // defaults applied

  v1::GetJobRequest get;
  get.set_job_id("j-1");
  get.set_include_events(true);
  v1::GetJobResponse got;
  ASSERT_TRUE(jobs_->GetJob(Context().get(), get, &got).ok());
  EXPECT_EQ(got.job().id(), "j-1");
  EXPECT_EQ(got.job().state(), v1::JOB_STATE_QUEUED);
  ASSERT_EQ(got.events_size(), 1);
  EXPECT_EQ(got.events(0).kind(), v1::JOB_EVENT_KIND_SUBMITTED);

  Submit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  v1::ListJobsRequest list;
  v1::ListJobsResponse listed;
  ASSERT_TRUE(jobs_->ListJobs(Context().get(), list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 2);
  EXPECT_EQ(listed.jobs(0).id(), "j-2");  // newest first
  EXPECT_EQ(listed.jobs(1).id(), "j-1");

  (*list.mutable_label_selector())["team"] = "vision";
  listed.Clear();
  ASSERT_TRUE(jobs_->ListJobs(Context().get(), list, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).id(), "j-1");
}

TEST_F(JobServiceTest, SubmitIsIdempotentWithARequestIdAndValidateOnlyStoresNothing) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = MakeSpec(1, 1, v1::ResourceSpec::CPU);
  submit.set_request_id("5b0f7c1e");
  v1::SubmitJobResponse first, second;
  ASSERT_TRUE(jobs_->Submit(Context().get(), submit, &first).ok());
  ASSERT_TRUE(jobs_->Submit(Context().get(), submit, &second).ok());
  EXPECT_EQ(first.job().id(), second.job().id());

  submit.clear_request_id();
  submit.set_validate_only(true);
  v1::SubmitJobResponse validated;
  ASSERT_TRUE(jobs_->Submit(Context().get(), submit, &validated).ok());
  EXPECT_EQ(validated.job().id(), "");
  v1::ListJobsResponse listed;
  ASSERT_TRUE(jobs_->ListJobs(Context().get(), v1::ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 1);
}

TEST_F(JobServiceTest, BadSpecIsInvalidArgumentNamingTheField) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = MakeSpec(1, 1, v1::ResourceSpec::CPU);
  submit.mutable_spec()->clear_model();
  v1::SubmitJobResponse response;
  grpc::Status status = jobs_->Submit(Context().get(), submit, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "model: required; set one of mlp, cnn, gpt");

  submit.clear_spec();
  status = jobs_->Submit(Context().get(), submit, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "spec: must be set");

  v1::ListJobsRequest list;
  list.set_page_size(2000);
  v1::ListJobsResponse listed;
  status = jobs_->ListJobs(Context().get(), list, &listed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "page_size: must be in [0, 1000], got 2000");
}

TEST_F(JobServiceTest, UnknownJobIsNotFoundEverywhere) {
  v1::GetJobRequest get;
  get.set_job_id("j-42");
  v1::GetJobResponse got;
  grpc::Status status = jobs_->GetJob(Context().get(), get, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job j-42 not found");

  v1::CancelJobRequest cancel;
  cancel.set_job_id("j-42");
  v1::CancelJobResponse cancelled;
  status = jobs_->CancelJob(Context().get(), cancel, &cancelled);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job j-42 not found");

  v1::ListCheckpointsRequest checkpoints;
  checkpoints.set_job_id("j-42");
  v1::ListCheckpointsResponse listed;
  status = jobs_->ListCheckpoints(Context().get(), checkpoints, &listed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job j-42 not found");

  v1::WatchJobRequest watch;
  watch.set_job_id("j-42");
  auto context = Context();
  auto watcher = jobs_->WatchJob(context.get(), watch);
  v1::WatchJobResponse update;
  EXPECT_FALSE(watcher->Read(&update));
  status = watcher->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job j-42 not found");

  v1::StreamLogsRequest logs;
  logs.set_job_id("j-42");
  auto logs_context = Context();
  auto reader = jobs_->StreamLogs(logs_context.get(), logs);
  v1::LogChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job j-42 not found");

  get.clear_job_id();
  status = jobs_->GetJob(Context().get(), get, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "job_id: must not be empty");
}

TEST_F(JobServiceTest, CancelAQueuedJobAndAgainReturnsItUnchanged) {
  const std::string job_id = Submit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job_id);
  cancel.set_reason("wrong lr");
  v1::CancelJobResponse response;
  ASSERT_TRUE(jobs_->CancelJob(Context().get(), cancel, &response).ok());
  EXPECT_EQ(response.job().state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(response.job().message(), "cancelled: wrong lr");
  v1::CancelJobResponse again;
  ASSERT_TRUE(jobs_->CancelJob(Context().get(), cancel, &again).ok());
  EXPECT_EQ(again.job().state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(again.job().end_time().seconds(), response.job().end_time().seconds());
}

TEST_F(JobServiceTest, ListNodesFiltersByState) {
  auto worker = NewWorker("node-a", 4);
  ASSERT_TRUE(worker->Register().ok());
  v1::ListNodesRequest request;
  v1::ListNodesResponse response;
  ASSERT_TRUE(jobs_->ListNodes(Context().get(), request, &response).ok());
  ASSERT_EQ(response.nodes_size(), 1);
  EXPECT_EQ(response.nodes(0).hostname(), "node-a");
  EXPECT_EQ(response.nodes(0).state(), v1::NODE_STATE_READY);
  EXPECT_EQ(response.nodes(0).free_cpu_slots(), 4);
  request.add_states(v1::NODE_STATE_LOST);
  response.Clear();
  ASSERT_TRUE(jobs_->ListNodes(Context().get(), request, &response).ok());
  EXPECT_EQ(response.nodes_size(), 0);
}

TEST_F(JobServiceTest, ListNodesPagesInHostnameOrderAndCountsEveryMatch) {
  std::vector<std::unique_ptr<FakeWorker>> workers;
  for (const char* host : {"node-e", "node-a", "node-d", "node-b", "node-c"}) {
    workers.push_back(NewWorker(host, 1));
    ASSERT_TRUE(workers.back()->Register().ok());
  }
  v1::ListNodesRequest request;
  request.set_page_size(2);
  std::vector<std::string> seen;
  for (int pages = 1;; ++pages) {
    ASSERT_LE(pages, 3);
    v1::ListNodesResponse response;
    ASSERT_TRUE(jobs_->ListNodes(Context().get(), request, &response).ok());
    EXPECT_EQ(response.total_size(), 5);
    EXPECT_LE(response.nodes_size(), 2);
    for (const v1::NodeInfo& node : response.nodes()) seen.push_back(node.hostname());
    if (response.next_page_token().empty()) {
      EXPECT_EQ(pages, 3);
      break;
    }
    request.set_page_token(response.next_page_token());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"node-a", "node-b", "node-c", "node-d", "node-e"}));

  // A count alone: one node, and how many match.
  v1::ListNodesRequest count;
  count.set_page_size(1);
  count.add_states(v1::NODE_STATE_READY);
  v1::ListNodesResponse counted;
  ASSERT_TRUE(jobs_->ListNodes(Context().get(), count, &counted).ok());
  EXPECT_EQ(counted.nodes_size(), 1);
  EXPECT_EQ(counted.total_size(), 5);

  v1::ListNodesRequest bad;
  bad.set_page_size(1001);
  v1::ListNodesResponse refused;
  grpc::Status status = jobs_->ListNodes(Context().get(), bad, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "page_size: must be in [0, 1000] (0: 1000), got 1001");
  bad.set_page_size(0);
  bad.set_page_token("no newline");
  status = jobs_->ListNodes(Context().get(), bad, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(JobServiceTest, WatchJobStreamsEveryChangeUntilTheJobEnds) {
  auto worker = NewWorker("node-a", 2);
  ASSERT_TRUE(worker->Register().ok());
  ASSERT_TRUE(worker->Open());
  ASSERT_TRUE(worker->Sync().has_value());
  const std::string job_id = Submit(MakeSpec(1, 2, v1::ResourceSpec::CPU));

  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  auto context = Context();
  auto watcher = jobs_->WatchJob(context.get(), request);
  std::vector<v1::WatchJobResponse> updates;
  v1::WatchJobResponse update;
  ASSERT_TRUE(watcher->Read(&update));  // the job now
  EXPECT_EQ(update.job().state(), v1::JOB_STATE_QUEUED);
  ASSERT_EQ(update.events_size(), 1);
  EXPECT_EQ(update.events(0).kind(), v1::JOB_EVENT_KIND_SUBMITTED);
  updates.push_back(update);
  std::thread reader([&] {
    v1::WatchJobResponse u;
    while (watcher->Read(&u)) updates.push_back(u);
  });

  server_->Tick();  // placed, starting
  auto start = worker->NextOrder();
  ASSERT_TRUE(start.has_value() && start->has_start());
  ASSERT_TRUE(worker->Progress(job_id, 1, 0, 1));  // running
  ASSERT_TRUE(worker->Sync().has_value());
  ASSERT_TRUE(worker->ReportExit(job_id, 1, 0, 0).ok());
  ASSERT_TRUE(worker->ReportExit(job_id, 1, 1, 0).ok());
  reader.join();  // the stream ends after the terminal state
  EXPECT_TRUE(watcher->Finish().ok());

  ASSERT_GE(updates.size(), 2u);
  EXPECT_EQ(updates.back().job().state(), v1::JOB_STATE_SUCCEEDED);
  std::vector<v1::JobState> states;
  std::vector<int64_t> sequences;
  for (const auto& u : updates) {
    if (states.empty() || states.back() != u.job().state()) states.push_back(u.job().state());
    for (const auto& e : u.events()) sequences.push_back(e.sequence());
  }
  // Every event exactly once, in order, and the job's states as they came.
  std::vector<int64_t> expected_sequences;
  for (int64_t s = 1; s <= static_cast<int64_t>(sequences.size()); ++s) expected_sequences.push_back(s);
  EXPECT_EQ(sequences, expected_sequences);
  EXPECT_EQ(sequences.size(), 5u);  // SUBMITTED PLACED STARTING RUNNING SUCCEEDED
  EXPECT_EQ(states.front(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(states.back(), v1::JOB_STATE_SUCCEEDED);
  for (size_t i = 1; i < states.size(); ++i) EXPECT_LT(states[i - 1], states[i]) << "states went back";

  // Watching a finished job: one message, then the end.
  auto again_context = Context();
  request.set_after_sequence(4);
  auto again = jobs_->WatchJob(again_context.get(), request);
  ASSERT_TRUE(again->Read(&update));
  EXPECT_EQ(update.job().state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(update.events_size(), 1);
  EXPECT_EQ(update.events(0).kind(), v1::JOB_EVENT_KIND_SUCCEEDED);
  EXPECT_FALSE(again->Read(&update));
  EXPECT_TRUE(again->Finish().ok());
}

// grpc.health.v1.Health/Check for the server ("") over the generic stub:
// an empty request; the answer {status: SERVING} is the two bytes 08 01.
TEST_F(JobServiceTest, HealthIsServing) {
  grpc::GenericStub stub(channel_);
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1), response;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<grpc::Status> status;
  auto context = Context();
  stub.UnaryCall(context.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = s;
                   cv.notify_all();
                 });
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return status.has_value(); }));
  ASSERT_TRUE(status->ok()) << status->error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
}

TEST_F(JobServiceTest, JobsSurviveACoordinatorRestart) {
  const std::string job_id = Submit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  StopServer();
  StartServer();
  v1::Job job = GetJob(job_id);
  EXPECT_EQ(job.id(), job_id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
}

// The store keeps microseconds; a time the coordinator hands out must not
// change when it is read back after a restart.
TEST_F(JobServiceTest, TimesReadTheSameAfterARestart) {
  clock_.SetTime(absl::FromUnixNanos(1795000000123456789));
  const std::string job_id = Submit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  const v1::Job before = GetJob(job_id);
  EXPECT_EQ(before.submit_time().nanos(), 123456000);
  StopServer();
  StartServer();
  const v1::Job after = GetJob(job_id);
  EXPECT_EQ(after.submit_time().seconds(), before.submit_time().seconds());
  EXPECT_EQ(after.submit_time().nanos(), before.submit_time().nanos());
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
