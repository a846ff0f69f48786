// JobController: submission, queries, scheduling, the happy path, cancel.
// Failures, restarts, fencing and recovery are in job_controller_failure_test.cc.
#include "coordinator/core/job_controller.h"

#include <functional>
#include <string>
#include <vector>

#include "coordinator/testing/job_controller_fixture.h"
#include "common/proto_time.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator {
namespace {

using testing::JobControllerFixture;
using testing::MakeSpec;

class JobControllerTest : public JobControllerFixture {};

TEST_F(JobControllerTest, SubmitRejectsABadSpecNamingTheField) {
  v1::JobSpec spec = MakeSpec(0, 1);
  absl::StatusOr<v1::Job> job = controller_->Submit(spec, {});
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(), "resources.nodes: must be >= 1, got 0");
  absl::StatusOr<v1::Job> long_id = controller_->Submit(MakeSpec(1, 1), {std::string(129, 'r'), "", false});
  EXPECT_EQ(long_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(long_id.status().message(), "request_id: must be at most 128 characters, got 129");
  // Every other submission bound: job_admission_test.cc.
  EXPECT_TRUE(store_->LoadJobs()->empty());
}

// `ringmaster validate` and `submit --strict` learn from it whether any
// registered node could ever run the spec.
TEST_F(JobControllerTest, ValidateOnlySaysWhenNoNodeCouldEverRunTheJob) {
  AddNode("host-a", 0, 2);  // 2 CPU slots
  absl::StatusOr<v1::Job> fits = controller_->Submit(MakeSpec(1, 2, v1::ResourceSpec::CPU), {"", "", true});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->unschedulable(), "");
  v1::JobSpec big = MakeSpec(1, 2, v1::ResourceSpec::CPU);
  big.mutable_resources()->set_cpus_per_rank(2);
  absl::StatusOr<v1::Job> too_big = controller_->Submit(big, {"", "", true});
  ASSERT_TRUE(too_big.ok()) << too_big.status();
  EXPECT_NE(too_big->unschedulable(), "");
  EXPECT_TRUE(store_->LoadJobs()->empty());
}

TEST_F(JobControllerTest, SubmitStoresDurablyWithDefaultsBeforeReturning) {
  absl::StatusOr<v1::Job> job = controller_->Submit(MakeSpec(2, 4), {"", "alice", false});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id(), "j-1");
  EXPECT_EQ(job->state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job->generation(), 0);
  EXPECT_EQ(FromProtoTime(job->submit_time()), clock_.Now());
  EXPECT_EQ(job->spec().parallelism().data(), 8);       // default applied: 2 x 4 / pipeline 1
  EXPECT_EQ(job->spec().checkpoint().keep(), 3);
  // The spec as sent is kept beside it, without the defaults.
  EXPECT_FALSE(job->submitted().spec().checkpoint().has_keep());
  EXPECT_EQ(job->submitted().spec().resources().nodes(), 2);
  // Already in the database, with its first event.
  std::vector<JobRecord> stored = *store_->LoadJobs();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].job.id(), "j-1");
  EXPECT_FALSE(stored[0].job.submitted().spec().checkpoint().has_keep());
  EXPECT_EQ(stored[0].user, "alice");
  EXPECT_EQ(Timeline("j-1"), "SUBMITTED:QUEUED");
  EXPECT_EQ(Events("j-1")[0].reason(), "submitted by alice");
  // Watchers heard of it.
  ASSERT_EQ(listener_.events().size(), 1u);
  EXPECT_EQ(listener_.events()[0].sequence(), 1);
}

TEST_F(JobControllerTest, ValidateOnlyStoresNothing) {
  absl::StatusOr<v1::Job> job = controller_->Submit(MakeSpec(1, 1), {"", "", true});
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->id(), "");
  EXPECT_EQ(job->spec().resources().cpus_per_rank(), 1);
  EXPECT_FALSE(job->submitted().spec().resources().has_cpus_per_rank());
  EXPECT_TRUE(store_->LoadJobs()->empty());
}

TEST_F(JobControllerTest, SubmitRecordsTheSetAssignments) {
  SubmitOptions options;
  options.overrides = {"optimizer.lr=0.5", "labels.team=a"};
  absl::StatusOr<v1::Job> job = controller_->Submit(MakeSpec(1, 1), options);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->submitted().overrides_size(), 2);
  EXPECT_EQ(job->submitted().overrides(1), "labels.team=a");
  EXPECT_EQ(controller_->views().GetJob(job->id())->submitted().overrides(0), "optimizer.lr=0.5");
}

TEST_F(JobControllerTest, RequestIdMakesSubmitIdempotent) {
  std::string a = MustSubmit(MakeSpec(1, 1), "uuid-1");
  std::string b = MustSubmit(MakeSpec(1, 1), "uuid-1");
  std::string c = MustSubmit(MakeSpec(1, 1), "uuid-2");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(controller_->views().ListJobs({})->jobs.size(), 2u);
}

TEST_F(JobControllerTest, UnknownJobsAreNotFound) {
  EXPECT_EQ(controller_->views().GetJob("j-404").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(controller_->views().GetJob("j-404").status().message(), "job j-404 not found");
  EXPECT_EQ(controller_->lifecycle().GetEvents("j-404", 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(controller_->lifecycle().Cancel("j-404", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(controller_->lifecycle().ListCheckpoints("j-404", true).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(controller_->lifecycle().LatestCheckpoint("j-404").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(controller_->lifecycle().ReportProgress("j-404", 1, 0, {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(controller_->views().GetRankProgress("j-404").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobControllerTest, ListJobsNewestFirstFilteredAndPaged) {
  for (int i = 0; i < 5; ++i) {
    v1::JobSpec spec = MakeSpec(1, 1);
    (*spec.mutable_labels())["team"] = i % 2 == 0 ? "vision" : "text";
    MustSubmit(spec);
  }
  ASSERT_TRUE(controller_->lifecycle().Cancel("j-2", "").ok());
  ListJobsQuery q;
  q.page_size = 2;
  ListJobsPage p1 = *controller_->views().ListJobs(q);
  ASSERT_EQ(p1.jobs.size(), 2u);
  EXPECT_EQ(p1.jobs[0].id(), "j-5");
  EXPECT_EQ(p1.jobs[1].id(), "j-4");
  q.page_token = p1.next_page_token;
  ListJobsPage p2 = *controller_->views().ListJobs(q);
  EXPECT_EQ(p2.jobs[0].id(), "j-3");
  q.page_token = p2.next_page_token;
  ListJobsPage p3 = *controller_->views().ListJobs(q);
  ASSERT_EQ(p3.jobs.size(), 1u);
  EXPECT_EQ(p3.jobs[0].id(), "j-1");
  EXPECT_EQ(p3.next_page_token, "");

  ListJobsQuery by_label;
  by_label.label_selector["team"] = "text";
  ListJobsPage text = *controller_->views().ListJobs(by_label);
  ASSERT_EQ(text.jobs.size(), 2u);
  EXPECT_EQ(text.jobs[0].id(), "j-4");
  ListJobsQuery by_state;
  by_state.states = {v1::JOB_STATE_CANCELLED};
  EXPECT_EQ(controller_->views().ListJobs(by_state)->jobs.size(), 1u);

  ListJobsQuery bad;
  bad.page_size = 1001;
  EXPECT_EQ(controller_->views().ListJobs(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.page_size = 0;
  bad.page_token = "garbage";
  EXPECT_EQ(controller_->views().ListJobs(bad).status().message(), "page_token: not a token ListJobs returned");
}

// Queue -> placed -> starting -> running -> succeeded, with everything a
// worker and a watcher see along the way.
TEST_F(JobControllerTest, HappyPathFromSubmitToSucceeded) {
  std::string a = AddNode("host-a", 8);
  std::string b = AddNode("host-b", 8);
  v1::JobSpec spec = MakeSpec(2, 8);
  spec.mutable_parallelism()->set_pipeline(2);
  std::string id = MustSubmit(spec);
  controller_->ScheduleNow();

  v1::Job job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_STARTING);
  EXPECT_EQ(job.generation(), 1);
  ASSERT_EQ(job.placement().world_size(), 16);
  EXPECT_EQ(job.placement().data_parallel_size(), 8);
  EXPECT_EQ(job.placement().ranks(9).node_id(), b);
  EXPECT_EQ(job.placement().ranks(9).local_rank(), 1);
  EXPECT_EQ(job.placement().ranks(9).pipeline_rank(), 1);
  EXPECT_EQ(job.placement().ranks(9).data_rank(), 4);
  EXPECT_EQ(job.placement().ranks(9).gpu_uuid(), "host-b-gpu1");
  EXPECT_EQ(Timeline(id), "SUBMITTED:QUEUED PLACED:PLACED STARTING:STARTING");
  // The placement is stored with the PLACED event.
  EXPECT_EQ(store_->LoadPlacement(id, 1)->ranks_size(), 16);

  // One start order per node, ranks contiguous, with the rendezvous deadline.
  std::vector<StartOrder> starts = listener_.starts();
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].node_id, a);
  EXPECT_EQ(starts[0].global_ranks, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(starts[1].global_ranks.front(), 8);
  EXPECT_EQ(starts[0].generation, 1);
  EXPECT_EQ(starts[0].rendezvous_deadline, clock_.Now() + absl::Minutes(5));
  EXPECT_EQ(starts[0].checkpoint_dir, "/ckpt/" + id + "/gen-1");
  EXPECT_FALSE(starts[0].resume_from.has_value());
  EXPECT_EQ(Assignments(b).size(), 1u);
  EXPECT_EQ(nodes_->GetNode(a)->free_gpus(), 0);

  // Every rank joins: RUNNING.
  JoinAll(id);
  job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(FromProtoTime(job.start_time()), clock_.Now());
  EXPECT_EQ(Events(id).back().reason(), "all 16 ranks joined the rendezvous");

  // Progress: rank 0's is the job's.
  v1::StepMetrics m;
  m.set_step(42);
  m.set_loss(1.5);
  EXPECT_EQ(*controller_->lifecycle().ReportProgress(id, 1, 0, m), false);
  m.set_step(41);
  EXPECT_EQ(*controller_->lifecycle().ReportProgress(id, 1, 3, m), false);
  EXPECT_EQ(MustGet(id).progress().step(), 42);
  EXPECT_EQ(controller_->views().GetRankProgress(id)->at(3).step(), 41);

  // All ranks exit 0: SUCCEEDED, every GPU free again.
  ExitAll(id, 0);
  job = MustGet(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.reason(), "Succeeded");
  EXPECT_EQ(job.message(), "all 16 ranks exited 0");
  EXPECT_TRUE(job.has_end_time());
  EXPECT_EQ(Timeline(id), "SUBMITTED:QUEUED PLACED:PLACED STARTING:STARTING RUNNING:RUNNING SUCCEEDED:SUCCEEDED");
  EXPECT_EQ(nodes_->GetNode(a)->free_gpus(), 8);
  EXPECT_EQ(nodes_->GetNode(b)->free_gpus(), 8);
  EXPECT_TRUE(Assignments(a).empty());
  // Every event reached the watchers, in sequence order.
  std::vector<v1::JobEvent> heard = listener_.events();
  ASSERT_EQ(heard.size(), 5u);
  for (size_t i = 0; i < heard.size(); ++i) EXPECT_EQ(heard[i].sequence(), static_cast<int64_t>(i + 1));
}

TEST_F(JobControllerTest, FirstProgressReportMakesAStartingJobRunning) {
  AddNode("host-a", 0, 8);
  std::string id = MustSubmit(MakeSpec(1, 1, v1::ResourceSpec::CPU));
  controller_->ScheduleNow();
  ASSERT_EQ(State(id), v1::JOB_STATE_STARTING);
  v1::StepMetrics m;
  m.set_step(10);
  EXPECT_EQ(*controller_->lifecycle().ReportProgress(id, 1, 0, m), false);
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
  // The single rank checked in through its progress: passing the
  // rendezvous deadline fails nothing.
  AdvanceWithHeartbeats(absl::Minutes(6));
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_RUNNING);
}

// Three jobs on capacity for two: never a partial gang, priority and FIFO
// kept, the third starts when capacity frees up.
TEST_F(JobControllerTest, ThreeJobsOnCapacityForTwo) {
  std::string a = AddNode("host-a", 8);
  std::string b = AddNode("host-b", 8);
  std::string j1 = MustSubmit(MakeSpec(1, 8, v1::ResourceSpec::CUDA, 0));
  std::string j2 = MustSubmit(MakeSpec(1, 8, v1::ResourceSpec::CUDA, 0));
  std::string j3 = MustSubmit(MakeSpec(1, 8, v1::ResourceSpec::CUDA, 5));
  controller_->ScheduleNow();
  EXPECT_EQ(State(j3), v1::JOB_STATE_STARTING);  // highest priority
  EXPECT_EQ(State(j1), v1::JOB_STATE_STARTING);  // FIFO: before j2
  EXPECT_EQ(State(j2), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(MustGet(j2).message(), "waiting for 1 node with 8 free GPUs each; 0 such nodes now");
  EXPECT_EQ(MustGet(j2).placement().ranks_size(), 0);
  controller_->ScheduleNow();  // nothing changes without capacity
  EXPECT_EQ(State(j2), v1::JOB_STATE_QUEUED);

  JoinAll(j1);
  ExitAll(j1, 0);
  controller_->Tick();
  EXPECT_EQ(State(j2), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(j2).placement().ranks(0).node_id(), MustGet(j1).placement().ranks(0).node_id());
}

TEST_F(JobControllerTest, GangWaitsForAllItsNodesAndHoldsSmallerJobsBack) {
  AddNode("host-a", 8);
  AddNode("host-b", 8);
  std::string small1 = MustSubmit(MakeSpec(1, 4));
  controller_->ScheduleNow();
  ASSERT_EQ(State(small1), v1::JOB_STATE_STARTING);
  std::string gang = MustSubmit(MakeSpec(2, 8));   // needs both nodes whole
  std::string small2 = MustSubmit(MakeSpec(1, 4));  // would fit beside small1
  controller_->ScheduleNow();
  EXPECT_EQ(State(gang), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(State(small2), v1::JOB_STATE_QUEUED);  // must not delay the gang
  EXPECT_EQ(MustGet(small2).message(), "waiting behind " + gang + ", which may use the free nodes");
  JoinAll(small1);
  ExitAll(small1, 0);
  controller_->ScheduleNow();
  EXPECT_EQ(State(gang), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(gang).placement().ranks_size(), 16);
  EXPECT_EQ(State(small2), v1::JOB_STATE_QUEUED);
}

TEST_F(JobControllerTest, BackfillOntoNodesTheHeadCannotUse) {
  AddNode("gpu-a", 8, 0, {{"pool", "train"}});
  AddNode("gpu-b", 8, 0, {{"pool", "train"}});
  AddNode("gpu-c", 4, 0, {{"pool", "dev"}});
  std::string running = MustSubmit(MakeSpec(1, 8));
  controller_->ScheduleNow();
  v1::JobSpec head_spec = MakeSpec(2, 8);
  (*head_spec.mutable_resources()->mutable_node_selector())["pool"] = "train";
  std::string head = MustSubmit(head_spec);
  std::string small = MustSubmit(MakeSpec(1, 2));
  controller_->ScheduleNow();
  EXPECT_EQ(State(head), v1::JOB_STATE_QUEUED);
  ASSERT_EQ(State(small), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(small).placement().ranks(0).hostname(), "gpu-c");
  EXPECT_NE(Events(small)[1].reason().find("backfilled"), std::string::npos) << Events(small)[1].reason();
}

TEST_F(JobControllerTest, NodeSelectorAndDeviceKindAreHonoured) {
  AddNode("cpu-a", 0, 16);
  std::string gpu_job = MustSubmit(MakeSpec(1, 1));
  std::string cpu_job = MustSubmit(MakeSpec(1, 4, v1::ResourceSpec::CPU));
  controller_->ScheduleNow();
  EXPECT_EQ(State(gpu_job), v1::JOB_STATE_QUEUED);
  const std::string why =
      "needs 1 node with 1 free GPU each; only 0 schedulable nodes could ever hold that (no node has a GPU: set "
      "resources.device: cpu to use CPU slots)";
  EXPECT_EQ(MustGet(gpu_job).message(), why);
  EXPECT_EQ(MustGet(gpu_job).unschedulable(), why) << "shown in jobs and describe while it waits";
  EXPECT_EQ(MustGet(cpu_job).unschedulable(), "");
  // Known at submission already (submit warns), and gone once it could run.
  std::string another = MustSubmit(MakeSpec(1, 1));
  EXPECT_EQ(MustGet(another).unschedulable(), why);
  AddNode("gpu-a", 1);
  controller_->ScheduleNow();
  EXPECT_EQ(MustGet(gpu_job).unschedulable(), "");
  ASSERT_EQ(State(cpu_job), v1::JOB_STATE_STARTING);
  EXPECT_EQ(MustGet(cpu_job).placement().ranks(3).gpu_uuid(), "");
  EXPECT_EQ(nodes_->GetNode(MustGet(cpu_job).placement().ranks(0).node_id())->free_cpu_slots(), 12);
}

// Cancel from every state a caller can see a job in.
TEST_F(JobControllerTest, CancelFromEachState) {
  std::string node = AddNode("host-a", 8);
  struct Case {
    std::string name;
    std::function<void(const std::string&)> drive;  // brings a fresh job to the state
    v1::JobState before;
    size_t stop_orders;
  };
  const std::vector<Case> cases = {
      {"queued", [](const std::string&) {}, v1::JOB_STATE_QUEUED, 0},
      {"starting", [&](const std::string&) { controller_->ScheduleNow(); }, v1::JOB_STATE_STARTING, 1},
      {"running", [&](const std::string& id) { RunToRunning(id); }, v1::JOB_STATE_RUNNING, 1},
      {"restarting",
       [&](const std::string& id) {
         RunToRunning(id);
         Exit(id, 0, 1, "boom");
       },
       v1::JOB_STATE_RESTARTING, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string id = MustSubmit(MakeSpec(1, 2));
    c.drive(id);
    ASSERT_EQ(State(id), c.before);
    listener_.Clear();
    absl::StatusOr<CancelResult> r = controller_->lifecycle().Cancel(id, "wrong lr");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->job.state(), v1::JOB_STATE_CANCELLED);
    EXPECT_EQ(r->job.reason(), "Cancelled");
    EXPECT_EQ(r->job.message(), "cancelled: wrong lr");
    EXPECT_TRUE(r->job.has_end_time());
    ASSERT_EQ(r->stop.size(), c.stop_orders);
    EXPECT_EQ(listener_.stops().size(), c.stop_orders);
    if (c.stop_orders > 0) {
      EXPECT_EQ(r->stop[0].node_id, node);
      EXPECT_EQ(r->stop[0].generation, r->job.generation());
      EXPECT_EQ(r->stop[0].grace_period, absl::Seconds(30));
      EXPECT_FALSE(r->stop[0].dump_state);  // a cancel is no failure: no state dump
    }
    v1::JobEvent last = Events(id).back();
    EXPECT_EQ(last.kind(), v1::JOB_EVENT_KIND_CANCELLED);
    EXPECT_EQ(last.from_state(), c.before);
    EXPECT_EQ(last.to_state(), v1::JOB_STATE_CANCELLED);
    // Its ranks still hold their GPUs until their exits are reported.
    if (r->job.generation() > 0) {
      v1::Job job = MustGet(id);
      for (int rank = 0; rank < job.placement().world_size(); ++rank) Exit(id, rank, -1, "", true, job.generation());
    }
    EXPECT_EQ(nodes_->GetNode(node)->free_gpus(), 8);
    // Cancelling again changes nothing.
    absl::StatusOr<CancelResult> again = controller_->lifecycle().Cancel(id, "again");
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->job.message(), "cancelled: wrong lr");
    EXPECT_TRUE(again->stop.empty());
    // Later reports for it are ignored.
    EXPECT_EQ(*controller_->lifecycle().ReportProgress(id, r->job.generation(), 0, {}), true);
    EXPECT_EQ(State(id), v1::JOB_STATE_CANCELLED);
  }
}

TEST_F(JobControllerTest, TerminalJobsStayTerminal) {
  AddNode("host-a", 8);
  std::string id = MustSubmit(MakeSpec(1, 1));
  RunToRunning(id);
  ExitAll(id, 0);
  ASSERT_EQ(State(id), v1::JOB_STATE_SUCCEEDED);
  const size_t events = Events(id).size();
  absl::StatusOr<CancelResult> r = controller_->lifecycle().Cancel(id, "late");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->job.state(), v1::JOB_STATE_SUCCEEDED);
  Exit(id, 0, 1, "late crash", false, 1);
  EXPECT_EQ(*controller_->lifecycle().ReportProgress(id, 1, 0, {}), true);
  controller_->Tick();
  EXPECT_EQ(State(id), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Events(id).size(), events);
}

}  // namespace
}  // namespace ringmaster::coordinator
