// Every node-facing call checks the node credential (issue #27, item 3):
// each method of NodeService, CheckpointService and RendezvousService, as
// the services' descriptors list them (so that a method added later without
// a row here fails this test), is called about the owner's rank 0 of
// generation 1 without a credential, with one no node has (UNAUTHENTICATED)
// and with another registered node's (PERMISSION_DENIED); the job is
// untouched and nothing of it is stored. Register is the one exception: it
// issues the credential (node_identity_test, node_credentials_test).
#include <functional>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_security.h"
#include "common/proto_time.h"
#include "coordinator/store/log_store.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

// Who a call presents itself as.
struct Caller {
  std::string credential;  // empty: no header
  std::string node_id;     // what the request names as its node, where it names one
};

class NodeIdentityEveryCallTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    CoordinatorFixture::SetUp();
    owner_ = NewWorker("node-a", 2);
    job_id_ = StartCpuJob(owner_.get(), &start_);  // generation 1 on node-a, STARTING
    other_ = NewWorker("node-b", 0);
    ASSERT_TRUE(other_->Register().ok());
  }
  void TearDown() override {
    owner_.reset();
    other_.reset();
    CoordinatorFixture::TearDown();
  }

  std::unique_ptr<grpc::ClientContext> As(const Caller& caller) {
    std::unique_ptr<grpc::ClientContext> context = Context(absl::Seconds(5));
    if (!caller.credential.empty()) context->AddMetadata(kNodeCredentialHeader, caller.credential);
    return context;
  }

  v1::RendezvousScope Scope() const {
    v1::RendezvousScope scope;
    scope.set_job_id(job_id_);
    scope.set_generation(1);
    scope.set_rank(0);
    scope.set_secret(start_.rendezvous_secret());  // the right secret: only the node is wrong
    return scope;
  }

  // A session that opens as caller.node_id and reports progress of the
  // owner's rank 0; its status.
  grpc::Status SessionProgress(const Caller& caller) {
    v1::WorkerMessage progress;
    progress.mutable_progress()->set_job_id(job_id_);
    progress.mutable_progress()->set_generation(1);
    progress.mutable_progress()->set_global_rank(0);
    progress.mutable_progress()->mutable_metrics()->set_step(7);
    return SessionSending(As(caller).get(), caller.node_id,
                          caller.node_id == other_->node_id() ? other_->session_id() : 1, progress);
  }

  // One call per method, "Service.Method", about the owner's rank 0.
  std::map<std::string, std::function<grpc::Status(const Caller&)>> Calls() {
    std::map<std::string, std::function<grpc::Status(const Caller&)>> calls;
    calls["NodeService.Session"] = [this](const Caller& c) { return SessionProgress(c); };
    calls["NodeService.ReportRankExit"] = [this](const Caller& c) {
      v1::ReportRankExitRequest request;
      request.set_node_id(c.node_id);
      request.set_job_id(job_id_);
      request.set_generation(1);
      request.set_global_rank(0);
      request.set_exit_code(78);
      v1::ReportRankExitResponse response;
      return nodes_->ReportRankExit(As(c).get(), request, &response);
    };
    calls["NodeService.PushLogs"] = [this](const Caller& c) {
      auto context = As(c);
      v1::PushLogsResponse response;
      auto writer = nodes_->PushLogs(context.get(), &response);
      v1::LogChunk chunk;
      v1::LogLine* line = chunk.add_lines();
      line->set_job_id(job_id_);
      line->set_generation(1);
      line->set_rank(0);
      line->set_stream(v1::LOG_STREAM_STDOUT);
      line->set_sequence(1);
      *line->mutable_time() = ToProtoTime(absl::Now());
      line->set_text("INJECTED");
      writer->Write(chunk);
      writer->WritesDone();
      return writer->Finish();
    };
    calls["CheckpointService.Commit"] = [this](const Caller& c) {
      v1::CommitCheckpointRequest request;
      request.set_job_id(job_id_);
      request.set_generation(1);
      request.set_step(10);
      request.set_path(start_.checkpoint_dir() + "/step-000000010");
      request.set_rank(0);
      request.set_pipeline_stages(1);
      request.set_whole_model(true);
      request.add_files()->set_path("model.safetensors");
      v1::CommitCheckpointResponse response;
      return checkpoints_->Commit(As(c).get(), request, &response);
    };
    calls["CheckpointService.GetLatestCheckpoint"] = [this](const Caller& c) {
      v1::GetLatestCheckpointRequest request;
      request.set_job_id(job_id_);
      v1::GetLatestCheckpointResponse response;
      return checkpoints_->GetLatestCheckpoint(As(c).get(), request, &response);
    };
    calls["CheckpointService.ReportDamaged"] = [this](const Caller& c) {
      v1::ReportDamagedCheckpointRequest request;
      request.set_job_id(job_id_);
      request.set_generation(1);
      request.set_rank(0);
      request.set_checkpoint_generation(1);
      request.set_checkpoint_step(10);
      v1::ReportDamagedCheckpointResponse response;
      return checkpoints_->ReportDamaged(As(c).get(), request, &response);
    };
    calls["RendezvousService.PublishNcclUniqueId"] = [this](const Caller& c) {
      v1::PublishNcclUniqueIdRequest request;
      *request.mutable_scope() = Scope();
      request.set_communicator("world");
      request.set_unique_id(std::string(128, 'x'));
      v1::PublishNcclUniqueIdResponse response;
      return rendezvous_->PublishNcclUniqueId(As(c).get(), request, &response);
    };
    calls["RendezvousService.GetNcclUniqueId"] = [this](const Caller& c) {
      v1::GetNcclUniqueIdRequest request;
      *request.mutable_scope() = Scope();
      request.set_communicator("world");
      *request.mutable_timeout() = ToProtoDuration(absl::Milliseconds(100));
      v1::GetNcclUniqueIdResponse response;
      return rendezvous_->GetNcclUniqueId(As(c).get(), request, &response);
    };
    calls["RendezvousService.KvSet"] = [this](const Caller& c) {
      v1::KvSetRequest request;
      *request.mutable_scope() = Scope();
      request.set_key("store/rank0");
      request.set_value("INJECTED");
      v1::KvSetResponse response;
      return rendezvous_->KvSet(As(c).get(), request, &response);
    };
    calls["RendezvousService.KvGet"] = [this](const Caller& c) {
      v1::KvGetRequest request;
      *request.mutable_scope() = Scope();
      request.set_key("store/rank0");
      v1::KvGetResponse response;
      return rendezvous_->KvGet(As(c).get(), request, &response);
    };
    calls["RendezvousService.KvWait"] = [this](const Caller& c) {
      v1::KvWaitRequest request;
      *request.mutable_scope() = Scope();
      request.add_keys("store/rank0");
      *request.mutable_timeout() = ToProtoDuration(absl::Milliseconds(100));
      v1::KvWaitResponse response;
      return rendezvous_->KvWait(As(c).get(), request, &response);
    };
    calls["RendezvousService.KvAdd"] = [this](const Caller& c) {
      v1::KvAddRequest request;
      *request.mutable_scope() = Scope();
      request.set_key("counter");
      request.set_delta(1);
      v1::KvAddResponse response;
      return rendezvous_->KvAdd(As(c).get(), request, &response);
    };
    return calls;
  }

  std::unique_ptr<FakeWorker> owner_;
  std::unique_ptr<FakeWorker> other_;
  std::string job_id_;
  v1::StartRanks start_;
};

TEST_F(NodeIdentityEveryCallTest, TheTableCoversEveryNodeFacingMethod) {
  std::set<std::string> listed;
  for (const char* name : {v1::NodeService::service_full_name(), v1::CheckpointService::service_full_name(),
                           v1::RendezvousService::service_full_name()}) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    for (int i = 0; i < service->method_count(); ++i) {
      listed.insert(absl::StrCat(service->name(), ".", service->method(i)->name()));
    }
  }
  listed.erase("NodeService.Register");  // issues the credential
  std::set<std::string> covered;
  for (const auto& [name, call] : Calls()) covered.insert(name);
  EXPECT_EQ(covered, listed) << "a node-facing method without a row here: add one";
}

TEST_F(NodeIdentityEveryCallTest, EveryCallWithoutTheCredentialIsUnauthenticated) {
  for (const auto& [name, call] : Calls()) {
    for (const Caller& caller : {Caller{"", owner_->node_id()}, Caller{std::string(64, 'f'), owner_->node_id()}}) {
      grpc::Status status = call(caller);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << name << (caller.credential.empty() ? " without a credential: " : " with an unknown credential: ")
          << status.error_code() << " " << status.error_message();
    }
  }
  const v1::Job job = GetJob(job_id_);
  EXPECT_EQ(job.state(), v1::JOB_STATE_STARTING) << job.message();
  EXPECT_EQ(job.progress().step(), 0);
  EXPECT_EQ(server_->logs().LineCount(job_id_), 0);
}

TEST_F(NodeIdentityEveryCallTest, EveryCallForAnotherNodesRankIsPermissionDenied) {
  const Caller other{other_->credential(), other_->node_id()};
  for (const auto& [name, call] : Calls()) {
    grpc::Status status = call(other);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << name << ": " << status.error_code() << " " << status.error_message();
  }
  // Another node's credential naming the owner's node: refused too.
  v1::ReportRankExitRequest exit;
  exit.set_node_id(owner_->node_id());
  exit.set_job_id(job_id_);
  exit.set_generation(1);
  exit.set_global_rank(0);
  exit.set_exit_code(78);
  v1::ReportRankExitResponse exited;
  EXPECT_EQ(nodes_->ReportRankExit(As(other).get(), exit, &exited).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  const v1::Job job = GetJob(job_id_);
  EXPECT_EQ(job.state(), v1::JOB_STATE_STARTING) << job.message();
  EXPECT_EQ(job.generation(), 1);
  EXPECT_EQ(job.progress().step(), 0);
  EXPECT_EQ(server_->logs().LineCount(job_id_), 0);
  v1::ListCheckpointsRequest list;
  list.set_job_id(job_id_);
  list.set_include_incomplete(true);
  v1::ListCheckpointsResponse listed;
  ASSERT_TRUE(jobs_->ListCheckpoints(Context().get(), list, &listed).ok());
  EXPECT_EQ(listed.checkpoints_size(), 0);
  // Nothing reached the rendezvous: the owner sees none of the values.
  v1::KvGetRequest get;
  *get.mutable_scope() = Scope();
  get.set_key("store/rank0");
  v1::KvGetResponse value;
  ASSERT_TRUE(rendezvous_->KvGet(owner_->NodeContext().get(), get, &value).ok());
  EXPECT_FALSE(value.found()) << value.value();
  v1::KvAddRequest add;
  *add.mutable_scope() = Scope();
  add.set_key("counter");
  add.set_delta(0);
  v1::KvAddResponse added;
  ASSERT_TRUE(rendezvous_->KvAdd(owner_->NodeContext().get(), add, &added).ok());
  EXPECT_EQ(added.value(), 0);
}

// The same calls from the owner's node pass the identity check (it refuses
// by node, not everything). Waits are left out: on the fixture's FakeClock
// they would park until the call's deadline.
TEST_F(NodeIdentityEveryCallTest, TheOwnersCallsPassTheCheck) {
  const Caller owner{owner_->credential(), owner_->node_id()};
  std::map<std::string, std::function<grpc::Status(const Caller&)>> calls = Calls();
  EXPECT_EQ(calls["CheckpointService.GetLatestCheckpoint"](owner).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(calls["RendezvousService.KvSet"](owner).ok());
  EXPECT_TRUE(calls["RendezvousService.KvGet"](owner).ok());
  EXPECT_TRUE(calls["RendezvousService.KvAdd"](owner).ok());
  EXPECT_TRUE(calls["RendezvousService.PublishNcclUniqueId"](owner).ok());
  EXPECT_TRUE(calls["NodeService.PushLogs"](owner).ok());
  EXPECT_EQ(server_->logs().LineCount(job_id_), 1);
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
