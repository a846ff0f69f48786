// Who reads which job, through the real gRPC server with users' tokens and a
// queues file (auth.h, AuthorizeRead): the owner, the members of the job's
// queue and admins read its describe (GetJob), its stream (WatchJob), its
// logs (StreamLogs) and its checkpoints (ListCheckpoints); anyone else gets
// PERMISSION_DENIED naming the job and why. ListJobs lists every job but
// hides the spec of those the caller may not read. Visibility::kOpen lets
// every user read every job.
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

constexpr char kAlice[] = "alice-token-0123456789";    // team-a
constexpr char kBob[] = "bob-token-0123456789ab";      // team-a
constexpr char kMallory[] = "mallory-token-012345678";  // team-b
constexpr char kRoot[] = "root-token-0123456789a";     // admin, in no queue

class VisibilityServiceTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    const std::string dir = NewTempDir("visibility");
    UseTokenFile({std::string(kAlice) + " alice", std::string(kBob) + " bob", std::string(kMallory) + " mallory",
                  std::string(kRoot) + " root admin"});
    std::ofstream(dir + "/queues.yaml") << "queues:\n"
                                           "  - name: team-a\n"
                                           "    members: [alice, bob]\n"
                                           "    nominal: {cpu_slots: 8}\n"
                                           "  - name: team-b\n"
                                           "    members: [mallory]\n"
                                           "    nominal: {cpu_slots: 8}\n";
    config_.queues_file = dir + "/queues.yaml";
    config_.visibility = visibility_;
    CoordinatorFixture::SetUp();
  }

  // Alice's job in team-a, with a name, labels and a node selector to hide.
  std::string SubmitAlices() {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = MakeSpec(1, 2, v1::ResourceSpec::CPU);
    request.mutable_spec()->set_name("secret-llm");
    (*request.mutable_spec()->mutable_labels())["project"] = "phoenix";
    (*request.mutable_spec()->mutable_resources()->mutable_node_selector())["rack"] = "r7";
    v1::SubmitJobResponse response;
    grpc::Status status = jobs_->Submit(As(kAlice).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.job().spec().queue(), "team-a");
    return response.job().id();
  }

  grpc::Status GetJobAs(const char* token, const std::string& job_id) {
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    request.set_include_events(true);
    v1::GetJobResponse response;
    return jobs_->GetJob(As(token).get(), request, &response);
  }

  // The stream's end after its first message (or none).
  grpc::Status WatchJobAs(const char* token, const std::string& job_id, bool* got_message) {
    v1::WatchJobRequest request;
    request.set_job_id(job_id);
    std::unique_ptr<grpc::ClientContext> context = As(token);
    auto reader = jobs_->WatchJob(context.get(), request);
    v1::WatchJobResponse message;
    *got_message = reader->Read(&message);
    if (*got_message) {
      EXPECT_EQ(message.job().id(), job_id);
      context->TryCancel();  // the job is not terminal: the stream would go on
    }
    return reader->Finish();
  }

  grpc::Status StreamLogsAs(const char* token, const std::string& job_id) {
    v1::StreamLogsRequest request;
    request.set_job_id(job_id);  // no follow: the stored lines (none yet), then OK
    std::unique_ptr<grpc::ClientContext> context = As(token);
    auto reader = jobs_->StreamLogs(context.get(), request);
    v1::LogChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  grpc::Status ListCheckpointsAs(const char* token, const std::string& job_id) {
    v1::ListCheckpointsRequest request;
    request.set_job_id(job_id);
    v1::ListCheckpointsResponse response;
    return jobs_->ListCheckpoints(As(token).get(), request, &response);
  }

  v1::JobSummary ListedAs(const char* token, const std::string& job_id) {
    v1::ListJobsResponse response;
    grpc::Status status = jobs_->ListJobs(As(token).get(), v1::ListJobsRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    for (const v1::JobSummary& job : response.jobs()) {
      if (job.id() == job_id) return job;
    }
    ADD_FAILURE() << job_id << " not listed";
    return v1::JobSummary();
  }

  // Every read of the job as `token`: OK, or the denial each gives.
  void ExpectReads(const char* token, const std::string& job_id, bool allowed) {
    SCOPED_TRACE(token);
    const grpc::StatusCode want = allowed ? grpc::StatusCode::OK : grpc::StatusCode::PERMISSION_DENIED;
    grpc::Status get = GetJobAs(token, job_id);
    EXPECT_EQ(get.error_code(), want) << get.error_message();
    bool got_message = false;
    grpc::Status watch = WatchJobAs(token, job_id, &got_message);
    EXPECT_EQ(got_message, allowed);
    EXPECT_EQ(watch.error_code(), allowed ? grpc::StatusCode::CANCELLED : want) << watch.error_message();
    grpc::Status logs = StreamLogsAs(token, job_id);
    EXPECT_EQ(logs.error_code(), want) << logs.error_message();
    grpc::Status checkpoints = ListCheckpointsAs(token, job_id);
    EXPECT_EQ(checkpoints.error_code(), want) << checkpoints.error_message();
    if (!allowed) {
      for (const grpc::Status& s : {get, watch, logs, checkpoints}) {
        EXPECT_NE(s.error_message().find("job " + job_id + " belongs to queue team-a; user mallory is not a member"),
                  std::string::npos)
            << s.error_message();
      }
    }
  }

  Visibility visibility_ = Visibility::kTeam;
};

TEST_F(VisibilityServiceTest, OwnerQueueMembersAndAdminsReadOthersAreDenied) {
  const std::string job = SubmitAlices();
  ExpectReads(kAlice, job, true);    // the owner
  ExpectReads(kBob, job, true);      // a member of team-a
  ExpectReads(kRoot, job, true);     // an admin
  ExpectReads(kMallory, job, false);  // team-b only
}

TEST_F(VisibilityServiceTest, ListJobsHidesSpecsOfJobsTheCallerMayNotRead) {
  const std::string job = SubmitAlices();
  for (const char* reader : {kAlice, kBob, kRoot}) {
    const v1::JobSummary seen = ListedAs(reader, job);
    EXPECT_FALSE(seen.spec_hidden());
    EXPECT_EQ(seen.spec().name(), "secret-llm");
    EXPECT_EQ(seen.spec().labels().at("project"), "phoenix");
    EXPECT_EQ(seen.spec().resources().node_selector().at("rack"), "r7");
  }
  const v1::JobSummary hidden = ListedAs(kMallory, job);
  EXPECT_TRUE(hidden.spec_hidden());
  EXPECT_EQ(hidden.spec().name(), "");
  EXPECT_TRUE(hidden.spec().labels().empty());
  EXPECT_TRUE(hidden.spec().resources().node_selector().empty());
  EXPECT_TRUE(hidden.message().empty());
  // Still listed with what places it in the queue.
  EXPECT_EQ(hidden.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(hidden.owner(), "alice");
  EXPECT_EQ(hidden.spec().queue(), "team-a");
  EXPECT_EQ(hidden.spec().resources().nodes(), 1);
  EXPECT_EQ(hidden.spec().resources().ranks_per_node(), 2);
  EXPECT_EQ(hidden.queue_position(), 1);
  EXPECT_TRUE(hidden.has_submit_time());
}

class OpenVisibilityServiceTest : public VisibilityServiceTest {
 protected:
  void SetUp() override {
    visibility_ = Visibility::kOpen;
    VisibilityServiceTest::SetUp();
  }
};

TEST_F(OpenVisibilityServiceTest, EveryUserReadsEveryJob) {
  const std::string job = SubmitAlices();
  ExpectReads(kMallory, job, true);
  const v1::JobSummary seen = ListedAs(kMallory, job);
  EXPECT_FALSE(seen.spec_hidden());
  EXPECT_EQ(seen.spec().name(), "secret-llm");
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
