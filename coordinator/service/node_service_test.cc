// NodeService over real gRPC with a fake worker: registration, the Session
// protocol (open, heartbeats and leases, start and stop orders, progress),
// rank exits, sessions that are refused, superseded or lost.
#include "absl/strings/str_cat.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/core/node_sessions.h"
#include "common/proto_time.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

using NodeServiceTest = CoordinatorFixture;

TEST_F(NodeServiceTest, RegisterAnswersTheSessionAndTheLease) {
  auto worker = NewWorker("node-a", 2);
  ASSERT_TRUE(worker->Register().ok());
  EXPECT_EQ(worker->node_id(), "n-1");
  EXPECT_GT(worker->session_id(), 0);
  EXPECT_EQ(FromProtoDuration(worker->registration().heartbeat_interval()), absl::Seconds(1));
  EXPECT_EQ(FromProtoDuration(worker->registration().lease_duration()), absl::Seconds(3));

  ASSERT_TRUE(worker->Open());
  std::optional<v1::LeaseGrant> lease = worker->Sync();
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(FromProtoTime(lease->expiry()), clock_.Now() + absl::Seconds(3));
  clock_.Advance(absl::Seconds(2));
  lease = worker->Sync();
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(FromProtoTime(lease->expiry()), clock_.Now() + absl::Seconds(3));
  EXPECT_EQ(server_->sessions().open_sessions(), 1u);

  v1::RegisterNodeRequest empty;
  v1::RegisterNodeResponse response;
  grpc::Status status = nodes_->Register(Context().get(), empty, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "node: must be set");
}

TEST_F(NodeServiceTest, AJobRunsToSuccessThroughTheSession) {
  auto worker = NewWorker("node-a", 2);
  v1::StartRanks start;
  const std::string job_id = StartCpuJob(worker.get(), &start);
  EXPECT_EQ(start.job_id(), job_id);
  EXPECT_EQ(start.generation(), 1);
  EXPECT_EQ(std::vector<int32_t>(start.global_ranks().begin(), start.global_ranks().end()),
            (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(start.placement().world_size(), 2);
  EXPECT_EQ(start.placement().ranks(1).node_id(), worker->node_id());
  EXPECT_EQ(start.checkpoint_dir(), config_.state_dir + "/checkpoints/" + job_id + "/gen-1");
  EXPECT_EQ(FromProtoTime(start.rendezvous_deadline()), clock_.Now() + absl::Minutes(5));
  EXPECT_EQ(start.spec().resources().ranks_per_node(), 2);
  EXPECT_EQ(GetJob(job_id).state(), v1::JOB_STATE_STARTING);

  v1::WorkerMessage result;
  result.mutable_start_result()->set_job_id(job_id);
  result.mutable_start_result()->set_generation(1);
  result.mutable_start_result()->add_started_ranks(0);
  result.mutable_start_result()->add_started_ranks(1);
  ASSERT_TRUE(worker->Send(result));
  ASSERT_TRUE(worker->Progress(job_id, 1, 0, 5));
  ASSERT_TRUE(worker->Progress(job_id, 1, 1, 5));
  ASSERT_TRUE(worker->Sync().has_value());  // both handled
  v1::Job job = GetJob(job_id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.progress().step(), 5);

  ASSERT_TRUE(worker->ReportExit(job_id, 1, 0, 0).ok());
  EXPECT_EQ(GetJob(job_id).state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(worker->ReportExit(job_id, 1, 1, 0).ok());
  job = GetJob(job_id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.message(), "all 2 ranks exited 0");

  // The slots are free again.
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(jobs_->ListNodes(Context().get(), v1::ListNodesRequest(), &nodes).ok());
  EXPECT_EQ(nodes.nodes(0).free_cpu_slots(), 2);
  EXPECT_TRUE(worker->Finish().ok());  // the worker ends its session: OK
}

TEST_F(NodeServiceTest, CancelSendsStopRanksDownTheSession) {
  auto worker = NewWorker("node-a", 2);
  v1::StartRanks start;
  const std::string job_id = StartCpuJob(worker.get(), &start);
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job_id);
  cancel.set_reason("by alice");
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(jobs_->CancelJob(Context().get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.job().state(), v1::JOB_STATE_CANCELLED);

  std::optional<v1::CoordinatorMessage> order = worker->NextOrder();
  ASSERT_TRUE(order.has_value() && order->has_stop()) << (order ? order->DebugString() : "no message");
  EXPECT_EQ(order->stop().job_id(), job_id);
  EXPECT_EQ(order->stop().generation(), 1);
  EXPECT_EQ(order->stop().global_ranks_size(), 0);  // all of the generation's ranks here
  EXPECT_EQ(order->stop().reason(), "cancelled: by alice");
  EXPECT_EQ(FromProtoDuration(order->stop().grace_period()), absl::Seconds(30));

  // Progress of the cancelled generation is answered with a stop order.
  ASSERT_TRUE(worker->Progress(job_id, 1, 1, 7));
  order = worker->NextOrder();
  ASSERT_TRUE(order.has_value() && order->has_stop());
  EXPECT_EQ(std::vector<int32_t>(order->stop().global_ranks().begin(), order->stop().global_ranks().end()),
            std::vector<int32_t>{1});
  EXPECT_EQ(order->stop().reason(), absl::StrCat("generation 1 of job ", job_id, " is over"));
}

TEST_F(NodeServiceTest, AReopenedSessionGetsTheCurrentAssignments) {
  auto worker = NewWorker("node-a", 2);
  v1::StartRanks start;
  const std::string job_id = StartCpuJob(worker.get(), &start);
  EXPECT_TRUE(worker->Finish().ok());

  // The same worker (its ranks still running, its node credential kept)
  // registers again and reopens.
  v1::RunningRank r0, r1;
  r0.set_job_id(job_id);
  r0.set_generation(1);
  r0.set_global_rank(0);
  r1 = r0;
  r1.set_global_rank(1);
  FakeWorker again(channel_, MakeNode("node-a", 0, 2));
  again.set_credential(worker->credential());
  ASSERT_TRUE(again.Register({r0, r1}).ok());
  EXPECT_EQ(again.node_id(), worker->node_id());
  EXPECT_EQ(again.registration().stop_size(), 0);
  ASSERT_TRUE(again.Open());
  std::optional<v1::CoordinatorMessage> order = again.NextOrder();
  ASSERT_TRUE(order.has_value() && order->has_start());
  EXPECT_EQ(order->start().job_id(), job_id);
  EXPECT_EQ(order->start().generation(), 1);
}

TEST_F(NodeServiceTest, StaleRanksAtRegistrationGetStopOrders) {
  auto worker = NewWorker("node-a", 2);
  ASSERT_TRUE(worker->Register().ok());
  v1::RunningRank stale;
  stale.set_job_id("j-7");
  stale.set_generation(3);
  stale.set_global_rank(0);
  ASSERT_TRUE(worker->Register({stale}).ok());
  ASSERT_EQ(worker->registration().stop_size(), 1);
  EXPECT_EQ(worker->registration().stop(0).job_id(), "j-7");
  EXPECT_EQ(worker->registration().stop(0).generation(), 3);
  EXPECT_EQ(worker->registration().stop(0).global_ranks_size(), 1);
}

TEST_F(NodeServiceTest, ASessionMustOpenWithTheCurrentRegistration) {
  auto worker = NewWorker("node-a", 2);
  ASSERT_TRUE(worker->Register().ok());
  ASSERT_TRUE(worker->Open(worker->session_id() + 1000));
  grpc::Status status = worker->Finish(/*close=*/false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), absl::StrCat("session ", worker->session_id() + 1000, " of node ",
                                                 worker->node_id(), " is not current; register again"));

  FakeWorker unknown(channel_, MakeNode("node-b", 0, 2));
  ASSERT_TRUE(unknown.Open(5));  // never registered: node id ""
  status = unknown.Finish(false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "open.node_id: must not be empty");
}

TEST_F(NodeServiceTest, TheFirstMessageMustBeOpen) {
  auto worker = NewWorker("node-a", 2);
  ASSERT_TRUE(worker->Register().ok());
  auto context = Context();
  auto stream = nodes_->Session(context.get());
  v1::WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat();
  ASSERT_TRUE(stream->Write(heartbeat));
  v1::CoordinatorMessage message;
  EXPECT_FALSE(stream->Read(&message));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "the first message of a session must be `open`");
}

TEST_F(NodeServiceTest, ANewRegistrationSupersedesTheOpenSession) {
  auto first = NewWorker("node-a", 2);
  ASSERT_TRUE(first->Register().ok());
  ASSERT_TRUE(first->Open());
  ASSERT_TRUE(first->Sync().has_value());
  const int64_t old_session = first->session_id();

  FakeWorker second(channel_, MakeNode("node-a", 0, 2));  // its worker restarted, its credential kept
  second.set_credential(first->credential());
  ASSERT_TRUE(second.Register().ok());
  ASSERT_TRUE(second.Open());
  ASSERT_TRUE(second.Sync().has_value());
  grpc::Status status = first->Finish(false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), absl::StrCat("session ", old_session, " of node ", first->node_id(),
                                                 " was superseded by session ", second.session_id()));
  EXPECT_EQ(server_->sessions().open_sessions(), 1u);
}

TEST_F(NodeServiceTest, ASilentNodeIsLostAndItsSessionClosed) {
  auto worker = NewWorker("node-a", 2);
  v1::StartRanks start;
  const std::string job_id = StartCpuJob(worker.get(), &start);
  clock_.Advance(absl::Seconds(4));  // past the 3 s lease
  server_->Tick();
  grpc::Status status = worker->Finish(false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), absl::StrCat("node ", worker->node_id(), " is LOST; register again"));
  v1::Job job = GetJob(job_id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(job.reason(), "NodeLost");
}

// With the ticker on (and an interval no test would wait for), a submission
// is scheduled at once: Submit pokes the ticker.
TEST_F(NodeServiceTest, ASubmissionIsScheduledWithoutWaitingForTheNextTick) {
  config_.tick_interval = absl::Hours(1);
  StopServer();
  StartServer();
  auto worker = NewWorker("node-a", 2);
  ASSERT_TRUE(worker->Register().ok());
  ASSERT_TRUE(worker->Open());
  ASSERT_TRUE(worker->Sync().has_value());
  const std::string job_id = Submit(MakeSpec(1, 2, v1::ResourceSpec::CPU));
  std::optional<v1::CoordinatorMessage> order = worker->NextOrder();
  ASSERT_TRUE(order.has_value() && order->has_start());
  EXPECT_EQ(order->start().job_id(), job_id);
}

TEST_F(NodeServiceTest, ReportRankExitValidatesAndIgnoresOverGenerations) {
  auto worker = NewWorker("node-a", 2);
  ASSERT_TRUE(worker->Register().ok());
  v1::ReportRankExitRequest request;
  request.set_job_id("j-1");
  v1::ReportRankExitResponse response;
  grpc::Status status = nodes_->ReportRankExit(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "node_id: must not be empty");
  EXPECT_TRUE(worker->ReportExit("j-99", 4, 0, 1).ok());  // unknown job: acknowledged
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
