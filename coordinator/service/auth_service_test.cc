// Users' tokens and job owners through the real gRPC server (the
// AuthProcessor in front of JobService): calls of different users on ONE
// connection keep their identities apart; only the owner or an admin may
// cancel; no or a wrong token is UNAUTHENTICATED.
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

constexpr char kAlice[] = "alice-token-0123456789";
constexpr char kBob[] = "bob-token-0123456789ab";
constexpr char kRoot[] = "root-token-0123456789a";

class AuthServiceTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    UseTokenFile({std::string(kAlice) + " alice", std::string(kBob) + " bob", std::string(kRoot) + " root admin"});
    CoordinatorFixture::SetUp();
  }

  // Submits as `token` on the fixture's one channel; the job's owner.
  std::string SubmitAs(const char* token, std::string* job_id) {
    v1::SubmitJobRequest request;
    *request.mutable_spec() = MakeSpec(1, 1, v1::ResourceSpec::CPU);
    v1::SubmitJobResponse response;
    grpc::Status status = jobs_->Submit(As(token).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    *job_id = response.job().id();
    return response.job().owner();
  }

  v1::Job Get(const std::string& job_id) {
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    v1::GetJobResponse response;
    grpc::Status status = jobs_->GetJob(As(kBob).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.job();
  }

  grpc::Status CancelAs(const char* token, const std::string& job_id) {
    v1::CancelJobRequest request;
    request.set_job_id(job_id);
    v1::CancelJobResponse response;
    return jobs_->CancelJob(As(token).get(), request, &response);
  }
};

TEST_F(AuthServiceTest, OwnersStayApartOnOneConnection) {
  std::string a1, b1, a2;
  EXPECT_EQ(SubmitAs(kAlice, &a1), "alice");
  EXPECT_EQ(SubmitAs(kBob, &b1), "bob");
  EXPECT_EQ(SubmitAs(kAlice, &a2), "alice");
  EXPECT_EQ(Get(a1).owner(), "alice") << "the owner is stored";

  grpc::Status denied = CancelAs(kBob, a1);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << denied.error_message();
  EXPECT_EQ(denied.error_message(), "job " + a1 + " belongs to alice; only its owner or an admin may cancel it");
  EXPECT_EQ(Get(a1).state(), v1::JOB_STATE_QUEUED);
  EXPECT_TRUE(CancelAs(kAlice, a1).ok());
  EXPECT_TRUE(CancelAs(kRoot, b1).ok()) << "an admin may cancel any job";
  EXPECT_EQ(Get(b1).state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(AuthServiceTest, NoOrWrongTokenIsUnauthenticated) {
  v1::ListJobsRequest request;
  v1::ListJobsResponse response;
  EXPECT_EQ(jobs_->ListJobs(As(nullptr).get(), request, &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(jobs_->ListJobs(As("not-a-valid-token-at-all").get(), request, &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(jobs_->ListJobs(As(kBob).get(), request, &response).ok());
  std::string job;
  SubmitAs(kAlice, &job);
  EXPECT_EQ(CancelAs(nullptr, job).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
