// RendezvousService and CheckpointService over real gRPC: the key-value
// store with fencing, NCCL ids (a blocked call woken by the publish, and by
// shutdown), checkpoint commits listed by JobService.
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/core/rendezvous.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

class RendezvousServiceTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    CoordinatorFixture::SetUp();
    worker_ = NewWorker("node-a", 2);
    job_id_ = StartCpuJob(worker_.get(), &start_);  // generation 1, STARTING
  }
  void TearDown() override {
    worker_.reset();
    CoordinatorFixture::TearDown();
  }

  v1::RendezvousScope Scope(int64_t generation, int32_t rank) {
    v1::RendezvousScope scope;
    scope.set_job_id(job_id_);
    scope.set_generation(generation);
    scope.set_rank(rank);
    scope.set_secret(server_->rendezvous().Secret(job_id_, generation));
    return scope;
  }
  grpc::Status Set(int64_t generation, const std::string& key, const std::string& value) {
    v1::KvSetRequest request;
    *request.mutable_scope() = Scope(generation, 0);
    request.set_key(key);
    request.set_value(value);
    v1::KvSetResponse response;
    return rendezvous_->KvSet(worker_->NodeContext().get(), request, &response);
  }
  // Waits (bounded) until `n` rendezvous calls are blocked in the server.
  void AwaitWaiters(int n) {
    const absl::Time give_up = absl::Now() + kRpcTimeout;
    while (server_->rendezvous().Waiters() < n && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(2));
    ASSERT_EQ(server_->rendezvous().Waiters(), n);
  }

  std::unique_ptr<FakeWorker> worker_;
  std::string job_id_;
  v1::StartRanks start_;
};

TEST_F(RendezvousServiceTest, KeyValueSetGetWaitAdd) {
  ASSERT_TRUE(Set(1, "store/rank0", "addr0").ok());

  v1::KvGetRequest get;
  *get.mutable_scope() = Scope(1, 1);
  get.set_key("store/rank0");
  v1::KvGetResponse got;
  ASSERT_TRUE(rendezvous_->KvGet(worker_->NodeContext().get(), get, &got).ok());
  EXPECT_TRUE(got.found());
  EXPECT_EQ(got.value(), "addr0");
  get.set_key("missing");
  got.Clear();
  ASSERT_TRUE(rendezvous_->KvGet(worker_->NodeContext().get(), get, &got).ok());
  EXPECT_FALSE(got.found());

  v1::KvAddRequest add;
  *add.mutable_scope() = Scope(1, 1);
  add.set_key("counter");
  add.set_delta(2);
  v1::KvAddResponse added;
  ASSERT_TRUE(rendezvous_->KvAdd(worker_->NodeContext().get(), add, &added).ok());
  EXPECT_EQ(added.value(), 2);
  add.set_delta(3);
  ASSERT_TRUE(rendezvous_->KvAdd(worker_->NodeContext().get(), add, &added).ok());
  EXPECT_EQ(added.value(), 5);
  add.set_key("store/rank0");  // not a number
  grpc::Status status = rendezvous_->KvAdd(worker_->NodeContext().get(), add, &added);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  v1::KvWaitRequest wait;
  *wait.mutable_scope() = Scope(1, 1);
  wait.add_keys("store/rank0");
  wait.add_keys("counter");
  v1::KvWaitResponse waited;
  ASSERT_TRUE(rendezvous_->KvWait(worker_->NodeContext().get(), wait, &waited).ok());
  ASSERT_EQ(waited.values_size(), 2);
  EXPECT_EQ(waited.values(0), "addr0");
  EXPECT_EQ(waited.values(1), "5");
}

TEST_F(RendezvousServiceTest, OnlyCallersWithTheGenerationsSecretGetAnswers) {
  // The secret came with the assignment, and it is this generation's.
  ASSERT_EQ(start_.rendezvous_secret().size(), 64u);
  EXPECT_EQ(start_.rendezvous_secret(), server_->rendezvous().Secret(job_id_, 1));
  ASSERT_TRUE(Set(1, "store/rank0", "addr0").ok());

  v1::KvGetRequest get;
  *get.mutable_scope() = Scope(1, 1);
  get.set_key("store/rank0");
  for (const std::string& secret : {std::string(), std::string(64, '0'), server_->rendezvous().Secret(job_id_, 2)}) {
    get.mutable_scope()->set_secret(secret);
    v1::KvGetResponse got;
    grpc::Status status = rendezvous_->KvGet(worker_->NodeContext().get(), get, &got);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_FALSE(got.found());
    EXPECT_EQ(got.value(), "");
  }
  v1::GetNcclUniqueIdRequest nccl;
  *nccl.mutable_scope() = Scope(1, 1);
  nccl.mutable_scope()->clear_secret();
  nccl.set_communicator("world");
  v1::GetNcclUniqueIdResponse id;
  EXPECT_EQ(rendezvous_->GetNcclUniqueId(worker_->NodeContext().get(), nccl, &id).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(server_->rendezvous().Waiters(), 0) << "refused before waiting";
}

TEST_F(RendezvousServiceTest, FencingRejectsOtherGenerations) {
  // A generation the job never had: no rank of it is placed on this node.
  grpc::Status status = Set(2, "k", "v");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), absl::StrCat("node ", worker_->node_id(), " has no rank 0 of job ", job_id_,
                                                 " (generation 2): a node acts only for the ranks placed on it"));

  status = Set(0, "k", "v");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "scope.generation: must be >= 1, got 0");

  v1::CancelJobRequest cancel;
  cancel.set_job_id(job_id_);
  v1::CancelJobResponse cancelled;
  ASSERT_TRUE(jobs_->CancelJob(Context().get(), cancel, &cancelled).ok());
  status = Set(1, "k", "v");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), absl::StrCat("generation 1 of job ", job_id_, " is over"));
}

TEST_F(RendezvousServiceTest, GetNcclUniqueIdWaitsForThePublish) {
  const std::string id(128, '\x7');
  v1::GetNcclUniqueIdResponse got;
  grpc::Status get_status;
  std::thread getter([&] {
    v1::GetNcclUniqueIdRequest request;
    *request.mutable_scope() = Scope(1, 1);
    request.set_communicator("world");
    get_status = rendezvous_->GetNcclUniqueId(worker_->NodeContext().get(), request, &got);
  });
  AwaitWaiters(1);
  v1::PublishNcclUniqueIdRequest publish;
  *publish.mutable_scope() = Scope(1, 0);
  publish.set_communicator("world");
  publish.set_unique_id(id);
  v1::PublishNcclUniqueIdResponse published;
  ASSERT_TRUE(rendezvous_->PublishNcclUniqueId(worker_->NodeContext().get(), publish, &published).ok());
  getter.join();
  ASSERT_TRUE(get_status.ok()) << get_status.error_message();
  EXPECT_EQ(got.unique_id(), id);
  // Both ranks joined: the generation is RUNNING.
  EXPECT_EQ(GetJob(job_id_).state(), v1::JOB_STATE_RUNNING);

  publish.set_unique_id(std::string(128, '\x8'));
  grpc::Status status = rendezvous_->PublishNcclUniqueId(worker_->NodeContext().get(), publish, &published);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(RendezvousServiceTest, ShutdownEndsBlockedWaitsWithUnavailable) {
  grpc::Status wait_status;
  std::thread waiter([&] {
    v1::KvWaitRequest request;
    *request.mutable_scope() = Scope(1, 1);
    request.add_keys("never");
    v1::KvWaitResponse response;
    wait_status = rendezvous_->KvWait(worker_->NodeContext().get(), request, &response);
  });
  AwaitWaiters(1);
  const absl::Time start = absl::Now();
  worker_.reset();
  StopServer();
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // not the shutdown deadline, not the wait's
  EXPECT_EQ(wait_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(wait_status.error_message(), "the coordinator is shutting down");
}

using CheckpointServiceTest = RendezvousServiceTest;

// A commit to the coordinator whose state directory is `state_dir`, at the
// path it decided: <state-dir>/checkpoints/<job>/gen-<g>/step-NNNNNNNNN.
v1::CommitCheckpointRequest Commit(const std::string& state_dir, const std::string& job_id, int64_t generation,
                                   int64_t step) {
  v1::CommitCheckpointRequest request;
  request.set_job_id(job_id);
  request.set_generation(generation);
  request.set_step(step);
  request.set_path(absl::StrFormat("%s/checkpoints/%s/gen-%d/step-%09d", state_dir, job_id, generation, step));
  request.set_rank(0);
  request.set_pipeline_stage(0);
  request.set_pipeline_stages(1);
  v1::CheckpointFile* file = request.add_files();
  file->set_path("model.safetensors");
  file->set_size_bytes(1024);
  file->mutable_checksum()->set_algorithm(v1::FileChecksum::CRC32);
  file->mutable_checksum()->set_hex("0badf00d");
  return request;
}

TEST_F(CheckpointServiceTest, CommitThenListAndLatest) {
  v1::CommitCheckpointResponse committed;
  ASSERT_TRUE(
      checkpoints_->Commit(worker_->NodeContext().get(), Commit(config_.state_dir, job_id_, 1, 10), &committed).ok());
  EXPECT_TRUE(committed.checkpoint().complete());
  EXPECT_EQ(committed.checkpoint().step(), 10);
  EXPECT_EQ(committed.checkpoint().total_bytes(), 1024);
  ASSERT_TRUE(
      checkpoints_->Commit(worker_->NodeContext().get(), Commit(config_.state_dir, job_id_, 1, 20), &committed).ok());

  v1::ListCheckpointsRequest list;
  list.set_job_id(job_id_);
  v1::ListCheckpointsResponse listed;
  ASSERT_TRUE(jobs_->ListCheckpoints(Context().get(), list, &listed).ok());
  ASSERT_EQ(listed.checkpoints_size(), 2);
  EXPECT_EQ(listed.checkpoints(0).step(), 20);  // newest first
  EXPECT_EQ(listed.checkpoints(1).step(), 10);

  v1::GetLatestCheckpointRequest latest;
  latest.set_job_id(job_id_);
  v1::GetLatestCheckpointResponse got;
  ASSERT_TRUE(checkpoints_->GetLatestCheckpoint(worker_->NodeContext().get(), latest, &got).ok());
  EXPECT_EQ(got.checkpoint().step(), 20);
  EXPECT_EQ(GetJob(job_id_).last_checkpoint().step(), 20);
}

TEST_F(CheckpointServiceTest, FencedMalformedAndUnknownCommits) {
  v1::CommitCheckpointResponse committed;
  grpc::Status status =
      checkpoints_->Commit(worker_->NodeContext().get(), Commit(config_.state_dir, job_id_, 2, 10), &committed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);  // no generation 2: nothing of it is here
  EXPECT_EQ(status.error_message(), absl::StrCat("node ", worker_->node_id(), " has no rank 0 of job ", job_id_,
                                                 " (generation 2): a node acts only for the ranks placed on it"));

  v1::CommitCheckpointRequest no_files = Commit(config_.state_dir, job_id_, 1, 10);
  no_files.clear_files();
  status = checkpoints_->Commit(worker_->NodeContext().get(), no_files, &committed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "files: at least one file is required");

  status =
      checkpoints_->Commit(worker_->NodeContext().get(), Commit(config_.state_dir, "j-99", 1, 10), &committed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "job j-99 not found");

  // Not the directory the coordinator decided (issue #27): refused, nothing recorded.
  v1::CommitCheckpointRequest escape = Commit(config_.state_dir, job_id_, 1, 10);
  escape.set_path(absl::StrCat(config_.state_dir, "/checkpoints/", job_id_, "/../j-99/gen-1/step-000000010"));
  status = checkpoints_->Commit(worker_->NodeContext().get(), escape, &committed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StartsWith(status.error_message(), absl::StrCat("path: \"", escape.path(), "\" is not where")))
      << status.error_message();

  v1::GetLatestCheckpointRequest latest;
  latest.set_job_id(job_id_);
  v1::GetLatestCheckpointResponse got;
  status = checkpoints_->GetLatestCheckpoint(worker_->NodeContext().get(), latest, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
