// Program jobs (JobSpec.program) in the coordinator: they run once their
// ranks are started (no rendezvous to wait for), rank 0's node gives them a
// MASTER_PORT no other generation holds there, and the progress timeout, a
// drain's and a preemption's checkpoint request apply only to a program that
// reports progress.
#include <set>
#include <string>

#include "coordinator/core/dispatcher.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/testing/job_controller_fixture.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;

v1::JobSpec ProgramSpec(int ranks, int progress_timeout_seconds = 0) {
  v1::JobSpec spec;
  spec.set_name("ddp");
  spec.mutable_program()->add_command("python3");
  spec.mutable_program()->add_command("train.py");
  spec.mutable_resources()->set_ranks_per_node(ranks);
  spec.mutable_resources()->set_device(v1::ResourceSpec::CPU);
  spec.mutable_restart()->set_max_restarts(0);
  spec.mutable_restart()->set_progress_timeout_seconds(progress_timeout_seconds);
  return spec;
}

class ProgramJobsTest : public JobControllerFixture {};

TEST_F(ProgramJobsTest, RunsOnceStartedWithAMasterPortOnRankZerosNode) {
  AddNode("host-a", 0, /*cpu_slots=*/4);
  const std::string first = MustSubmit(ProgramSpec(2));
  const std::string second = MustSubmit(ProgramSpec(2));
  controller_->Tick();
  EXPECT_EQ(State(first), v1::JOB_STATE_RUNNING);  // nobody joins a rendezvous: running once started
  EXPECT_EQ(State(second), v1::JOB_STATE_RUNNING);
  const v1::Placement a = MustGet(first).placement();
  const v1::Placement b = MustGet(second).placement();
  EXPECT_EQ(a.master_addr(), "host-a");  // NodeInfo.address host-a:29500, without the port
  EXPECT_GE(a.master_port(), 29500);
  EXPECT_LT(a.master_port(), 30000);
  EXPECT_NE(a.master_port(), b.master_port());
  ASSERT_FALSE(listener_.starts().empty());
  EXPECT_EQ(listener_.starts().back().rendezvous_deadline, absl::InfiniteFuture());
  EXPECT_EQ(listener_.starts().back().placement.master_port(), b.master_port());
}

TEST_F(ProgramJobsTest, MasterPortAvoidsTakenPortsAndRunsOut) {
  const int32_t free_port = ChooseMasterPort("job", 1, {});
  EXPECT_EQ(ChooseMasterPort("job", 1, {}), free_port);  // a function of job and generation
  EXPECT_NE(ChooseMasterPort("job", 1, {free_port}), free_port);
  std::set<int32_t> all;
  for (int32_t port = 29500; port < 30000; ++port) all.insert(port);
  EXPECT_EQ(ChooseMasterPort("job", 1, all), 0);
}

TEST_F(ProgramJobsTest, ProgressTimeoutOnlyOnceTheProgramReports) {
  AddNode("host-a", 0, 2);
  const std::string id = MustSubmit(ProgramSpec(2, /*progress_timeout_seconds=*/60));
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_RUNNING);
  AdvanceWithHeartbeats(absl::Seconds(120));
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);  // silent programs are not timed out

  v1::StepMetrics metrics;
  metrics.set_step(5);
  ASSERT_TRUE(controller_->lifecycle().ReportProgress(id, MustGet(id).generation(), 0, metrics).ok());
  AdvanceWithHeartbeats(absl::Seconds(61));
  controller_->Tick();
  const v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);  // max_restarts 0
  EXPECT_EQ(job.reason(), "ProgressTimeout");
}

TEST_F(ProgramJobsTest, DrainStopsASilentProgramAtOnceWithoutUsingARestart) {
  AddNode("host-a", 0, 2);
  const std::string id = MustSubmit(ProgramSpec(2));
  controller_->Tick();
  ASSERT_EQ(State(id), v1::JOB_STATE_RUNNING);
  AddNode("host-b", 0, 2);
  listener_.Clear();
  ASSERT_TRUE(controller_->DrainNode("host-a", "alice", "driver upgrade").ok());
  EXPECT_TRUE(listener_.checkpoint_orders().empty());  // nobody would answer
  ASSERT_EQ(listener_.stops().size(), 1u);
  const v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(job.reason(), "NodeDrained");
  EXPECT_EQ(job.restarts(), 0);
}

TEST_F(ProgramJobsTest, DrainAsksAReportingProgramForACheckpointFirst) {
  const std::string a = AddNode("host-a", 0, 2);
  const std::string id = MustSubmit(ProgramSpec(2));
  controller_->Tick();
  v1::StepMetrics metrics;
  metrics.set_step(1);
  ASSERT_TRUE(controller_->lifecycle().ReportProgress(id, MustGet(id).generation(), 0, metrics).ok());
  listener_.Clear();
  ASSERT_TRUE(controller_->DrainNode("host-a", "alice", "driver upgrade").ok());
  ASSERT_EQ(listener_.checkpoint_orders().size(), 1u);
  EXPECT_EQ(listener_.checkpoint_orders()[0].node_id, a);
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(listener_.stops().empty());
}

TEST_F(ProgramJobsTest, PreemptionStopsASilentProgramAtOnce) {
  AddNode("host-a", 0, 2);
  const std::string id = MustSubmit(ProgramSpec(2));
  controller_->Tick();
  listener_.Clear();
  ASSERT_TRUE(controller_->lifecycle().Preempt(id, "queue research reclaims its quota").ok());
  EXPECT_TRUE(listener_.checkpoint_orders().empty());
  EXPECT_EQ(listener_.stops().size(), 1u);
  EXPECT_EQ(MustGet(id).reason(), "Preempted");
}

}  // namespace
}  // namespace ringmaster::coordinator
