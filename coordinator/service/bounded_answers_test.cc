// Bounded input and bounded answers over real gRPC (issue #27, item 4):
// Submit refuses a spec beyond its limits before storing anything, with a
// small answer either way; ListJobs carries summaries; GetJob pages a
// timeline; WatchJob's first message is a bounded window with a token for
// the rest; CancelJob bounds its reason.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/proto_time.h"
#include "coordinator/store/store.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

using BoundedAnswersTest = CoordinatorFixture;

TEST_F(BoundedAnswersTest, A66000LabelSpecIsRefusedNamingLabelsAndNothingIsStored) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = MakeSpec(1, 1, v1::ResourceSpec::CPU);
  for (int i = 0; i < 66000; ++i) {
    (*submit.mutable_spec()->mutable_labels())[absl::StrFormat("k%05d", i)] = std::string(250, 'v');
  }
  v1::SubmitJobResponse response;
  grpc::Status status = jobs_->Submit(Context().get(), submit, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "labels: at most 64 labels, got 66000");
  v1::ListJobsResponse listed;
  ASSERT_TRUE(jobs_->ListJobs(Context().get(), v1::ListJobsRequest(), &listed).ok());
  EXPECT_EQ(listed.jobs_size(), 0);

  // Within the limits: stored, and the answer does not repeat the request.
  submit.mutable_spec()->clear_labels();
  submit.add_overrides("name=x");
  ASSERT_TRUE(jobs_->Submit(Context().get(), submit, &response).ok());
  EXPECT_FALSE(response.job().has_submitted());
  EXPECT_TRUE(GetJob(response.job().id()).has_submitted());  // describe still has it
}

TEST_F(BoundedAnswersTest, ListJobsCarriesSummaries) {
  auto worker = NewWorker("node-a", 2);
  v1::StartRanks start;
  const std::string id = StartCpuJob(worker.get(), &start);
  v1::ListJobsResponse listed;
  ASSERT_TRUE(jobs_->ListJobs(Context().get(), v1::ListJobsRequest(), &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  const v1::JobSummary& s = listed.jobs(0);
  EXPECT_EQ(s.id(), id);
  EXPECT_EQ(s.state(), v1::JOB_STATE_STARTING);
  EXPECT_EQ(s.placement().world_size(), 2);
  EXPECT_EQ(s.placement().ranks_size(), 0);
  EXPECT_EQ(s.spec().resources().ranks_per_node(), 2);
  EXPECT_EQ(s.queue_position(), 0);
}

TEST_F(BoundedAnswersTest, ListJobsRefusesASelectorNoJobCanMatchAndNamesEachStateOnce) {
  v1::SubmitJobRequest submit;
  *submit.mutable_spec() = MakeSpec(1, 1, v1::ResourceSpec::CPU);
  (*submit.mutable_spec()->mutable_labels())["team"] = "text";
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(jobs_->Submit(Context().get(), submit, &submitted).ok());

  v1::ListJobsRequest request;
  for (int i = 0; i < 70000; ++i) (*request.mutable_label_selector())[absl::StrFormat("k%05d", i)] = "v";
  v1::ListJobsResponse listed;
  grpc::Status status = jobs_->ListJobs(Context().get(), request, &listed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "label_selector: at most 64 entries (a job has at most that many labels), got 70000");

  request.clear_label_selector();
  (*request.mutable_label_selector())["team"] = std::string(256, 'x');
  status = jobs_->ListJobs(Context().get(), request, &listed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("label_selector: keys of at most 63 bytes"), std::string::npos);

  request.clear_label_selector();
  (*request.mutable_label_selector())["team"] = "text";
  for (int i = 0; i < 70000; ++i) request.add_states(v1::JOB_STATE_QUEUED);
  ASSERT_TRUE(jobs_->ListJobs(Context().get(), request, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).id(), submitted.job().id());
}

TEST_F(BoundedAnswersTest, GetJobPagesTheTimelineNewestFirst) {
  auto worker = NewWorker("node-a", 2);
  v1::StartRanks start;
  const std::string id = StartCpuJob(worker.get(), &start);  // SUBMITTED, PLACED, STARTING
  v1::GetJobRequest get;
  get.set_job_id(id);
  get.set_include_events(true);
  get.set_events_page_size(1);
  std::vector<int64_t> sequences;
  for (int page = 0; page < 10; ++page) {
    v1::GetJobResponse got;
    ASSERT_TRUE(jobs_->GetJob(Context().get(), get, &got).ok());
    ASSERT_EQ(got.events_size(), 1);
    sequences.insert(sequences.begin(), got.events(0).sequence());
    if (got.events_next_page_token().empty()) break;
    EXPECT_EQ(got.events_next_page_token(), absl::StrCat(got.events(0).sequence()));
    get.set_events_page_token(got.events_next_page_token());
  }
  EXPECT_EQ(sequences, (std::vector<int64_t>{1, 2, 3}));

  v1::GetJobResponse got;
  get.set_events_page_token("zebra");
  grpc::Status status = jobs_->GetJob(Context().get(), get, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "events_page_token: not a token GetJob or WatchJob returned");
  get.clear_events_page_token();
  get.set_events_page_size(1001);
  status = jobs_->GetJob(Context().get(), get, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "events_page_size: must be in [0, 1000], got 1001");
}

// A timeline at its bound with long reasons (19 kinds x 33 events x 2 KiB,
// written straight into the database beside the coordinator's): WatchJob's
// first message holds the newest MiB, says where the rest ends, and GetJob
// reads the rest from there.
TEST_F(BoundedAnswersTest, WatchJobsFirstMessageIsABoundedWindow) {
  const std::string id = Submit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({config_.state_dir + "/coordinator.db"});
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<JobRecord> records = *(*store)->LoadJobs();
    ASSERT_EQ(records.size(), 1u);
    std::vector<v1::JobEvent> events;
    for (int kind = v1::JOB_EVENT_KIND_PLACED; kind <= v1::JOB_EVENT_KIND_NODE_DRAINED; ++kind) {
      for (int i = 0; i < 1 + kEventsKeptPerKind; ++i) {
        v1::JobEvent& e = events.emplace_back();
        e.set_kind(static_cast<v1::JobEventKind>(kind));
        e.set_from_state(v1::JOB_STATE_QUEUED);
        e.set_to_state(v1::JOB_STATE_QUEUED);
        *e.mutable_time() = ToProtoTime(clock_.Now());
        e.set_reason(std::string(2000, 'r'));
      }
    }
    ASSERT_TRUE((*store)->UpdateJob(records[0], events, nullptr).ok());
  }
  v1::WatchJobRequest request;
  request.set_job_id(id);
  auto context = Context();
  auto watcher = jobs_->WatchJob(context.get(), request);
  v1::WatchJobResponse first;
  ASSERT_TRUE(watcher->Read(&first));
  context->TryCancel();
  size_t bytes = 0;
  for (const v1::JobEvent& e : first.events()) bytes += e.ByteSizeLong();
  EXPECT_LE(bytes, size_t{1} << 20);
  ASSERT_GT(first.events_size(), 0);
  EXPECT_GT(first.events(0).sequence(), 1);
  EXPECT_EQ(first.older_events_page_token(), absl::StrCat(first.events(0).sequence()));

  v1::GetJobRequest get;
  get.set_job_id(id);
  get.set_include_events(true);
  get.set_events_page_size(1000);
  get.set_events_page_token(first.older_events_page_token());
  v1::GetJobResponse older;
  ASSERT_TRUE(jobs_->GetJob(Context().get(), get, &older).ok());
  ASSERT_GT(older.events_size(), 0);
  EXPECT_EQ(older.events(older.events_size() - 1).sequence() + 1, first.events(0).sequence());
  EXPECT_EQ(older.events(0).sequence(), 1);  // the rest fits one page
  EXPECT_EQ(older.events_next_page_token(), "");
}

TEST_F(BoundedAnswersTest, ACancelReasonIsBounded) {
  const std::string id = Submit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  cancel.set_reason(std::string(1 << 20, 'x'));
  v1::CancelJobResponse response;
  grpc::Status status = jobs_->CancelJob(Context().get(), cancel, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "reason: at most 1024 bytes, got 1048576");
  EXPECT_EQ(GetJob(id).state(), v1::JOB_STATE_QUEUED);
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
