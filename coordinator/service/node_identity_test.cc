// Node identity over real gRPC (issue #27, item 3): the credential a node
// gets at its first registration says which node calls, and a node acts only
// for the ranks placed on it in the generation the call names: registration,
// Session messages, ReportRankExit, checkpoint commits and damage reports,
// rendezvous calls (PushLogs: logs_service_test). Refused calls change
// nothing. The credential outlives a coordinator restart; over mutual TLS a
// node is also bound to its client certificate.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/dev_ca_for_test.h"
#include "common/grpc_security.h"
#include "common/proto_time.h"
#include "common/tls.h"
#include "coordinator/testing/coordinator_fixture.h"
#include "coordinator/testing/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::coordinator::testing {
namespace {

bool IsCredential(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string NotPlaced(const std::string& node, int32_t rank, const std::string& job, int64_t generation) {
  return absl::StrCat("node ", node, " has no rank ", rank, " of job ", job, " (generation ", generation,
                      "): a node acts only for the ranks placed on it");
}

std::unique_ptr<grpc::ClientContext> WithCredential(const std::string& credential) {
  std::unique_ptr<grpc::ClientContext> context = Context();
  if (!credential.empty()) context->AddMetadata(kNodeCredentialHeader, credential);
  return context;
}

class NodeIdentityTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    CoordinatorFixture::SetUp();
    owner_ = NewWorker("node-a", 2);
    job_id_ = StartCpuJob(owner_.get(), &start_);  // generation 1 on node-a, STARTING
    other_ = NewWorker("node-b", 0);               // a node of its own (the caller's), no capacity
    ASSERT_TRUE(other_->Register().ok());
  }
  void TearDown() override {
    owner_.reset();
    other_.reset();
    CoordinatorFixture::TearDown();
  }

  // A Register naming `node_id` from `hostname`, with `credential` (empty: none).
  grpc::Status RegisterAs(const std::string& node_id, const std::string& hostname, const std::string& credential,
                          v1::RegisterNodeResponse* response) {
    v1::RegisterNodeRequest request;
    *request.mutable_node() = MakeNode(hostname, 0, 2);
    request.mutable_node()->set_node_id(node_id);
    return nodes_->Register(WithCredential(credential).get(), request, response);
  }

  grpc::Status ExitAs(const FakeWorker& worker, const std::string& named_node, int64_t generation, int32_t rank,
                      int32_t exit_code) {
    v1::ReportRankExitRequest request;
    request.set_node_id(named_node);
    request.set_job_id(job_id_);
    request.set_generation(generation);
    request.set_global_rank(rank);
    request.set_exit_code(exit_code);
    v1::ReportRankExitResponse response;
    return nodes_->ReportRankExit(worker.NodeContext().get(), request, &response);
  }

  // A Session with `credential` that opens (node_id, session_id), sends
  // `message` and a heartbeat, waits for the lease or the end: its status.
  grpc::Status SessionAs(const std::string& credential, const std::string& node_id, int64_t session_id,
                         const v1::WorkerMessage& message) {
    return SessionSending(WithCredential(credential).get(), node_id, session_id, message);
  }

  v1::WorkerMessage Progress(int32_t rank, int64_t step) {
    v1::WorkerMessage message;
    message.mutable_progress()->set_job_id(job_id_);
    message.mutable_progress()->set_generation(1);
    message.mutable_progress()->set_global_rank(rank);
    message.mutable_progress()->mutable_metrics()->set_step(step);
    return message;
  }

  v1::WorkerMessage StartFailure() {
    v1::WorkerMessage message;
    v1::StartRanksResult* result = message.mutable_start_result();
    result->set_job_id(job_id_);
    result->set_generation(1);
    result->set_error("data.path: /etc is outside this node's data roots");
    result->set_unrecoverable(true);
    return message;
  }

  // The job is as StartCpuJob left it: STARTING, generation 1, no progress.
  void ExpectUntouched() {
    v1::Job job = GetJob(job_id_);
    EXPECT_EQ(job.state(), v1::JOB_STATE_STARTING) << job.message();
    EXPECT_EQ(job.generation(), 1);
    EXPECT_EQ(job.progress().step(), 0);
  }

  std::unique_ptr<FakeWorker> owner_;
  std::unique_ptr<FakeWorker> other_;
  std::string job_id_;
  v1::StartRanks start_;
};

TEST_F(NodeIdentityTest, TheFirstRegistrationIssuesTheCredentialAndOnlyItRegistersTheNodeAgain) {
  EXPECT_TRUE(IsCredential(owner_->credential())) << owner_->credential();
  EXPECT_NE(owner_->credential(), other_->credential());

  // Its own worker, again: the same node, no new credential.
  v1::RegisterNodeResponse again;
  ASSERT_TRUE(RegisterAs(owner_->node_id(), "node-a", owner_->credential(), &again).ok());
  EXPECT_EQ(again.node_id(), owner_->node_id());
  EXPECT_EQ(again.credential(), "");
  ASSERT_TRUE(RegisterAs("", "node-a", owner_->credential(), &again).ok());  // the id lost, the credential kept
  EXPECT_EQ(again.node_id(), owner_->node_id());

  // Anyone else naming it: refused, whatever else it presents.
  v1::RegisterNodeResponse taken;
  grpc::Status status = RegisterAs(owner_->node_id(), "evil", "", &taken);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StartsWith(status.error_message(),
                               absl::StrCat("node ", owner_->node_id(),
                                            " has a credential and this registration does not present it")))
      << status.error_message();
  status = RegisterAs(owner_->node_id(), "evil", other_->credential(), &taken);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), absl::StrCat("node.node_id: ", owner_->node_id(),
                                                 " is not the node of the credential this call presents (",
                                                 other_->node_id(), ")"));
  status = RegisterAs(owner_->node_id(), "evil", std::string(64, 'a'), &taken);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Its hostname and address without the credential: a new node, not this one.
  ASSERT_TRUE(RegisterAs("", "node-a", "", &taken).ok());
  EXPECT_NE(taken.node_id(), owner_->node_id());
  EXPECT_TRUE(IsCredential(taken.credential()));
  ExpectUntouched();

  // Users never see a credential's hash.
  v1::ListNodesResponse nodes;
  ASSERT_TRUE(jobs_->ListNodes(Context().get(), v1::ListNodesRequest(), &nodes).ok());
  ASSERT_EQ(nodes.nodes_size(), 3);
  for (const v1::NodeInfo& node : nodes.nodes()) EXPECT_EQ(node.credential_sha256(), "") << node.node_id();
}

TEST_F(NodeIdentityTest, RankExitsOfAnotherNodesRanksAreRefused) {
  grpc::Status status = ExitAs(*other_, owner_->node_id(), 1, 0, 78);  // naming the owner
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), absl::StrCat("node_id: ", owner_->node_id(),
                                                 " is not the node of this call's credential (", other_->node_id(),
                                                 ")"));
  status = ExitAs(*other_, other_->node_id(), 1, 0, 78);  // naming itself
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), NotPlaced(other_->node_id(), 0, job_id_, 1));
  FakeWorker anonymous(channel_, MakeNode("node-c", 0, 1));
  status = ExitAs(anonymous, owner_->node_id(), 1, 0, 78);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message(),
            "no node credential (x-ringmaster-node-credential): a worker gets its node's when it registers");
  anonymous.set_credential(std::string(64, '0'));
  status = ExitAs(anonymous, owner_->node_id(), 1, 0, 78);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(status.error_message(), "the node credential is not one of a registered node's; register again");
  ExpectUntouched();

  // The owner's own report goes through: exit 78 fails the job at once.
  ASSERT_TRUE(ExitAs(*owner_, owner_->node_id(), 1, 0, 78).ok());
  EXPECT_EQ(GetJob(job_id_).state(), v1::JOB_STATE_FAILED);
}

TEST_F(NodeIdentityTest, SessionMessagesAboutAnotherNodesRanksEndTheSessionAndChangeNothing) {
  // The owner's session opened with another node's credential, or none.
  grpc::Status status = SessionAs(other_->credential(), owner_->node_id(), owner_->session_id(), Progress(0, 999999));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), absl::StrCat("open.node_id: ", owner_->node_id(),
                                                 " is not the node of this call's credential (", other_->node_id(),
                                                 ")"));
  status = SessionAs("", owner_->node_id(), owner_->session_id(), StartFailure());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(owner_->Sync().has_value()) << "the owner's session is not disturbed";

  // Its own session: a progress report or a start failure for the owner's ranks.
  v1::RegisterNodeResponse own;
  ASSERT_TRUE(RegisterAs(other_->node_id(), "node-b", other_->credential(), &own).ok());
  status = SessionAs(other_->credential(), other_->node_id(), own.session_id(), Progress(0, 999999));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), NotPlaced(other_->node_id(), 0, job_id_, 1));
  ASSERT_TRUE(RegisterAs(other_->node_id(), "node-b", other_->credential(), &own).ok());
  status = SessionAs(other_->credential(), other_->node_id(), own.session_id(), StartFailure());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), absl::StrCat("node ", other_->node_id(), " has no rank of job ", job_id_,
                                                 " (generation 1): a node acts only for the ranks placed on it"));
  ExpectUntouched();

  // The owner's own progress counts.
  ASSERT_TRUE(owner_->Progress(job_id_, 1, 0, 5));
  ASSERT_TRUE(owner_->Sync().has_value());
  EXPECT_EQ(GetJob(job_id_).state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(GetJob(job_id_).progress().step(), 5);
}

TEST_F(NodeIdentityTest, CheckpointAndRendezvousCallsForAnotherNodesRanksAreRefused) {
  v1::CommitCheckpointRequest commit;
  commit.set_job_id(job_id_);
  commit.set_generation(1);
  commit.set_step(10);
  commit.set_path(start_.checkpoint_dir() + "/step-000000010");
  commit.set_rank(0);
  commit.set_pipeline_stages(1);
  commit.set_whole_model(true);
  commit.add_files()->set_path("model.safetensors");
  v1::CommitCheckpointResponse committed;
  grpc::Status status = checkpoints_->Commit(other_->NodeContext().get(), commit, &committed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), NotPlaced(other_->node_id(), 0, job_id_, 1));
  status = checkpoints_->Commit(Context().get(), commit, &committed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  v1::ReportDamagedCheckpointRequest damaged;
  damaged.set_job_id(job_id_);
  damaged.set_generation(1);
  damaged.set_rank(1);
  damaged.set_checkpoint_generation(1);
  damaged.set_checkpoint_step(10);
  v1::ReportDamagedCheckpointResponse reported;
  status = checkpoints_->ReportDamaged(other_->NodeContext().get(), damaged, &reported);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), NotPlaced(other_->node_id(), 1, job_id_, 1));

  v1::GetLatestCheckpointRequest latest;  // a read: only a node the job runs on, nobody without a credential
  latest.set_job_id(job_id_);
  v1::GetLatestCheckpointResponse got;
  EXPECT_EQ(checkpoints_->GetLatestCheckpoint(Context().get(), latest, &got).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  status = checkpoints_->GetLatestCheckpoint(other_->NodeContext().get(), latest, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), absl::StrCat("node ", other_->node_id(), " has no rank of job ", job_id_,
                                                 " (generation 1): a node acts only for the ranks placed on it"));
  EXPECT_EQ(checkpoints_->GetLatestCheckpoint(owner_->NodeContext().get(), latest, &got).error_code(),
            grpc::StatusCode::NOT_FOUND);  // its own job: none committed yet

  v1::ListCheckpointsRequest list;
  list.set_job_id(job_id_);
  list.set_include_incomplete(true);
  v1::ListCheckpointsResponse listed;
  ASSERT_TRUE(jobs_->ListCheckpoints(Context().get(), list, &listed).ok());
  EXPECT_EQ(listed.checkpoints_size(), 0);

  // Rendezvous, with the generation's secret: only from the owner.
  v1::KvSetRequest set;
  set.mutable_scope()->set_job_id(job_id_);
  set.mutable_scope()->set_generation(1);
  set.mutable_scope()->set_rank(0);
  set.mutable_scope()->set_secret(start_.rendezvous_secret());
  set.set_key("store/rank0");
  set.set_value("INJECTED");
  v1::KvSetResponse done;
  status = rendezvous_->KvSet(other_->NodeContext().get(), set, &done);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), NotPlaced(other_->node_id(), 0, job_id_, 1));
  EXPECT_EQ(rendezvous_->KvSet(Context().get(), set, &done).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::KvGetRequest get;
  *get.mutable_scope() = set.scope();
  get.set_key("store/rank0");
  v1::KvGetResponse value;
  ASSERT_TRUE(rendezvous_->KvGet(owner_->NodeContext().get(), get, &value).ok());
  EXPECT_FALSE(value.found()) << value.value();
  set.set_value("addr0");
  ASSERT_TRUE(rendezvous_->KvSet(owner_->NodeContext().get(), set, &done).ok());
  ExpectUntouched();
}

// A generation that is over still belongs to the nodes it was placed on: their
// late exit reports release their slots; nobody else's are taken.
TEST_F(NodeIdentityTest, LateReportsOfAnOverGenerationComeOnlyFromItsNodes) {
  ASSERT_TRUE(ExitAs(*owner_, owner_->node_id(), 1, 0, 1).ok());  // generation 1 fails: restart
  EXPECT_EQ(GetJob(job_id_).state(), v1::JOB_STATE_RESTARTING);
  ASSERT_TRUE(ExitAs(*owner_, owner_->node_id(), 1, 1, 0).ok());  // its other rank stopped: its slot free
  server_->Tick();
  ASSERT_EQ(GetJob(job_id_).generation(), 2);
  // Generation 1's placement is read from the store now.
  grpc::Status status = ExitAs(*other_, other_->node_id(), 1, 1, 0);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), NotPlaced(other_->node_id(), 1, job_id_, 1));
  EXPECT_TRUE(ExitAs(*owner_, owner_->node_id(), 1, 1, 0).ok()) << "a retried report: acknowledged";
  status = ExitAs(*other_, other_->node_id(), 2, 0, 78);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  status = ExitAs(*other_, other_->node_id(), 3, 0, 78);  // a generation that does not exist yet
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(GetJob(job_id_).state(), v1::JOB_STATE_STARTING);
}

// The credential is stored with the node: after a coordinator restart its
// worker registers again with it, and nobody else can.
TEST_F(NodeIdentityTest, TheCredentialOutlivesACoordinatorRestart) {
  const std::string node_id = owner_->node_id();
  const std::string credential = owner_->credential();
  owner_.reset();
  other_.reset();
  StopServer();
  StartServer();
  v1::RegisterNodeResponse response;
  grpc::Status status = RegisterAs(node_id, "evil", "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  status = RegisterAs("", "node-a", "", &response);  // its hostname: a new node
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_NE(response.node_id(), node_id);
  status = RegisterAs(node_id, "node-a", credential, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.node_id(), node_id);
  EXPECT_EQ(response.credential(), "");
}

// Over mutual TLS a node is bound to the client certificate it registered
// with: its credential with another certificate (of the same CA) is refused.
class NodeIdentityTlsTest : public CoordinatorFixture {
 protected:
  void SetUp() override {
    ca_ = ringmaster::testing::MakeDevCa("ca");
    ASSERT_FALSE(ca_.empty());
    // A second worker certificate of the same CA, for another subject.
    const std::string sign = absl::StrCat(
        "cd '", ca_, "' && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out other.key 2>/dev/null",
        " && openssl req -new -key other.key -subj '/O=Ringmaster dev/CN=other-worker' -out other.csr",
        " && printf 'extendedKeyUsage=clientAuth\\nsubjectAltName=DNS:other-worker\\n' > other.ext",
        " && openssl x509 -req -in other.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -sha256",
        " -extfile other.ext -out other.crt 2>/dev/null && chmod 600 other.key");
    ASSERT_EQ(std::system(sign.c_str()), 0) << sign;
    const std::string dir = NewTempDir("secrets");
    std::ofstream(dir + "/tokens") << "user-token-0123456789 alice admin\n";
    std::ofstream(dir + "/join") << "join-token-0123456789abcdef\n";
    chmod((dir + "/tokens").c_str(), 0600);
    chmod((dir + "/join").c_str(), 0600);
    CoordinatorFixture::SetUp();
    StopServer();
    clock_.SetTime(absl::Now());  // certificates are checked at the coordinator's clock
    config_.tls = TlsFiles{ca_ + "/ca.crt", ca_ + "/coordinator.crt", ca_ + "/coordinator.key"};
    config_.token_file = dir + "/tokens";
    config_.join_token_file = dir + "/join";
    StartServer();
  }

  std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& name) {
    absl::StatusOr<TlsMaterial> tls =
        LoadTlsMaterial(TlsFiles{ca_ + "/ca.crt", ca_ + "/" + name + ".crt", ca_ + "/" + name + ".key"}, true);
    EXPECT_TRUE(tls.ok()) << tls.status();
    grpc::ChannelArguments args;
    return MakeChannel(absl::StrCat("localhost:", server_->port()), MakeChannelCredentials(&*tls), args,
                       {{kJoinTokenHeader, "join-token-0123456789abcdef"}});
  }

  std::string ca_;
};

TEST_F(NodeIdentityTlsTest, ANodeIsBoundToItsClientCertificate) {
  FakeWorker worker(WorkerChannel("worker"), MakeNode("node-a", 0, 2));
  grpc::Status status = worker.Register();
  ASSERT_TRUE(status.ok()) << status.error_message();
  absl::StatusOr<v1::NodeInfo> node = server_->nodes().GetNode(worker.node_id());
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(absl::StrContains(node->client_identity(), "CN=ringmaster-worker")) << node->client_identity();
  EXPECT_TRUE(absl::StrContains(node->client_identity(), "san=ringmaster-worker")) << node->client_identity();
  ASSERT_TRUE(worker.Register().ok()) << "the same certificate and credential";

  // The node's credential, presented with another certificate of the same CA.
  FakeWorker stolen(WorkerChannel("other"), MakeNode("node-a", 0, 2));
  stolen.set_credential(worker.credential());
  status = stolen.Register();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "is bound to the client certificate"))
      << status.error_message();
  v1::ReportRankExitRequest exit;
  exit.set_node_id(worker.node_id());
  exit.set_job_id("j-1");
  exit.set_generation(1);
  exit.set_exit_code(78);
  v1::ReportRankExitResponse reported;
  auto stub = v1::NodeService::NewStub(WorkerChannel("other"));
  status = stub->ReportRankExit(stolen.NodeContext().get(), exit, &reported);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "CN=other-worker")) << status.error_message();
  // That certificate registers a node of its own.
  FakeWorker other(WorkerChannel("other"), MakeNode("node-b", 0, 2));
  ASSERT_TRUE(other.Register().ok());
  EXPECT_NE(other.node_id(), worker.node_id());
}

}  // namespace
}  // namespace ringmaster::coordinator::testing
