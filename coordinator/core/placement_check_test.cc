// JobLifecycle::CheckPlacedOn: a node acts only for the ranks placed on it,
// in the generation a call names: the current one (in memory), an older one
// (from the store, also after a coordinator restart); never for a
// generation that does not exist. JobLifecycle::CheckHostsJob: what a node
// may read of a job, only while its current generation has a rank there.
#include <string>

#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

class PlacementCheckTest : public testing::JobControllerFixture {
 protected:
  // A job of 2 nodes x 1 CPU rank on a (rank 0) and b (rank 1), STARTING.
  void SetUp() override {
    JobControllerFixture::SetUp();
    a_ = AddNode("host-a", 0, 1);
    b_ = AddNode("host-b", 0, 1);
    c_ = AddNode("host-c", 0, 0);  // no capacity: never placed on
    job_ = MustSubmit(testing::MakeSpec(2, 1, v1::ResourceSpec::CPU));
    controller_->ScheduleNow();
    ASSERT_EQ(MustGet(job_).generation(), 1);
    const v1::Placement p = MustGet(job_).placement();
    if (p.ranks(0).node_id() != a_) std::swap(a_, b_);  // a_ holds rank 0
  }

  absl::StatusCode Check(const std::string& node, int64_t generation, std::vector<int32_t> ranks) {
    return controller_->lifecycle().CheckPlacedOn(node, job_, generation, ranks).code();
  }

  std::string a_, b_, c_, job_;
};

TEST_F(PlacementCheckTest, TheCurrentGenerationsRanksBelongToTheirNodes) {
  EXPECT_EQ(Check(a_, 1, {0}), absl::StatusCode::kOk);
  EXPECT_EQ(Check(b_, 1, {1}), absl::StatusCode::kOk);
  EXPECT_EQ(Check(a_, 1, {}), absl::StatusCode::kOk) << "some rank of it";
  EXPECT_EQ(Check(a_, 1, {1}), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(a_, 1, {0, 1}), absl::StatusCode::kPermissionDenied) << "every rank must be the node's";
  EXPECT_EQ(Check(c_, 1, {}), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(a_, 1, {-1}), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(a_, 1, {2}), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(a_, 0, {0}), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(a_, 2, {0}), absl::StatusCode::kPermissionDenied) << "a generation not placed yet";
  absl::Status s = controller_->lifecycle().CheckPlacedOn(c_, job_, 1, {0});
  EXPECT_EQ(s.message(), "node " + c_ + " has no rank 0 of job " + job_ +
                             " (generation 1): a node acts only for the ranks placed on it");
  s = controller_->lifecycle().CheckPlacedOn(c_, job_, 1, {});
  EXPECT_EQ(s.message(), "node " + c_ + " has no rank of job " + job_ +
                             " (generation 1): a node acts only for the ranks placed on it");
  EXPECT_EQ(controller_->lifecycle().CheckPlacedOn(a_, "j-404", 1, {0}).code(), absl::StatusCode::kNotFound);
}

TEST_F(PlacementCheckTest, AnOlderGenerationStillBelongsToTheNodesItWasPlacedOn) {
  Exit(job_, 0, 1);  // generation 1 fails
  Exit(job_, 1, 0, "", /*stopped_by_worker=*/true, 1);
  controller_->ScheduleNow();
  ASSERT_EQ(MustGet(job_).generation(), 2);
  EXPECT_EQ(Check(a_, 1, {0}), absl::StatusCode::kOk);
  EXPECT_EQ(Check(b_, 1, {1}), absl::StatusCode::kOk);
  EXPECT_EQ(Check(b_, 1, {0}), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(c_, 1, {}), absl::StatusCode::kPermissionDenied);
  Restart();
  EXPECT_EQ(Check(a_, 1, {0}), absl::StatusCode::kOk) << "read from the store";
  EXPECT_EQ(Check(b_, 1, {0}), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Check(c_, 2, {}), absl::StatusCode::kPermissionDenied);
}

// What a node may read of a job (GetLatestCheckpoint): only while some rank
// of the job's current generation is placed on it.
TEST_F(PlacementCheckTest, OnlyTheNodesOfTheCurrentGenerationHostTheJob) {
  EXPECT_TRUE(controller_->lifecycle().CheckHostsJob(a_, job_).ok());
  EXPECT_TRUE(controller_->lifecycle().CheckHostsJob(b_, job_).ok());
  absl::Status s = controller_->lifecycle().CheckHostsJob(c_, job_);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "node " + c_ + " has no rank of job " + job_ +
                             " (generation 1): a node acts only for the ranks placed on it");
  EXPECT_EQ(controller_->lifecycle().CheckHostsJob(a_, "j-404").code(), absl::StatusCode::kNotFound);
  const std::string queued = MustSubmit(testing::MakeSpec(2, 1, v1::ResourceSpec::CPU));  // a and b are full
  controller_->ScheduleNow();
  ASSERT_EQ(MustGet(queued).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(controller_->lifecycle().CheckHostsJob(a_, queued).code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace ringmaster::coordinator
