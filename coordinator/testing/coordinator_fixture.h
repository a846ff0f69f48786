#ifndef RINGMASTER_COORDINATOR_COORDINATOR_FIXTURE_H_
#define RINGMASTER_COORDINATOR_COORDINATOR_FIXTURE_H_

// The whole coordinator in the test process: a CoordinatorServer on
// 127.0.0.1:0 (and /metrics on a free port) over a temporary state
// directory, on a FakeClock, with no ticker (tests call Tick()); client stubs
// for its four services; and FakeWorker, a worker's side of NodeService that
// the test drives. Every RPC has a deadline (kRpcTimeout), every wait for a
// message is bounded. Test-only.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/service/coordinator_server.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/checkpoint_service.grpc.pb.h"
#include "proto/job_service.grpc.pb.h"
#include "proto/node_service.grpc.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"

namespace ringmaster::coordinator::testing {

inline constexpr absl::Duration kRpcTimeout = absl::Seconds(10);

// A ClientContext with a deadline kRpcTimeout from now.
std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = kRpcTimeout);

// The worker's end of NodeService: Register, one Session stream (a reader
// thread queues what the coordinator sends), ReportRankExit, PushLogs. Like a
// worker, it keeps the credential its first registration got and sends it
// with each of its calls; NodeContext() gives other calls the same.
class FakeWorker {
 public:
  FakeWorker(std::shared_ptr<grpc::Channel> channel, v1::NodeInfo node);
  ~FakeWorker();

  grpc::Status Register(const std::vector<v1::RunningRank>& running = {});
  // Opens the Session and sends `open` (with `session_id`, default: the
  // registered one).
  bool Open(std::optional<int64_t> session_id = std::nullopt);
  bool Send(const v1::WorkerMessage& message);
  bool Heartbeat();
  bool Progress(const std::string& job_id, int64_t generation, int32_t rank, int64_t step);
  // The next message from the coordinator, leases included; nullopt after
  // `timeout` or once the stream ended.
  std::optional<v1::CoordinatorMessage> Next(absl::Duration timeout = kRpcTimeout);
  // The next start or stop order (lease grants skipped).
  std::optional<v1::CoordinatorMessage> NextOrder(absl::Duration timeout = kRpcTimeout);
  // Sends a heartbeat and waits for its lease: every message sent before it
  // has been handled (a session's messages are handled in order). Orders
  // that arrive meanwhile stay queued for NextOrder.
  std::optional<v1::LeaseGrant> Sync();
  // Waits for the stream to end (after WritesDone if `close`); its status.
  grpc::Status Finish(bool close = true);
  grpc::Status ReportExit(const std::string& job_id, int64_t generation, int32_t rank, int32_t exit_code);
  // A context (deadline `timeout`) carrying this node's credential: for
  // RendezvousService, CheckpointService and PushLogs calls made as this node.
  std::unique_ptr<grpc::ClientContext> NodeContext(absl::Duration timeout = kRpcTimeout) const;

  const std::string& node_id() const { return node_id_; }
  const std::string& credential() const { return credential_; }
  void set_credential(const std::string& credential) { credential_ = credential; }
  int64_t session_id() const { return session_id_; }
  const v1::RegisterNodeResponse& registration() const { return registration_; }

 private:
  void ReadLoop();

  std::unique_ptr<v1::NodeService::Stub> stub_;
  v1::NodeInfo node_;
  std::string node_id_;
  int64_t session_id_ = 0;
  std::string credential_;  // the node's, once issued
  v1::RegisterNodeResponse registration_;

  std::unique_ptr<grpc::ClientContext> session_context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream_;
  std::thread reader_;
  std::optional<grpc::Status> finished_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::CoordinatorMessage> received_;
  bool stream_ended_ = false;
};

class CoordinatorFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // (Re)starts the server on config_ (the same state directory): a restart.
  void StartServer();
  void StopServer();

  std::unique_ptr<FakeWorker> NewWorker(const std::string& hostname, int cpu_slots);
  // Submits; the job's id ("" and a test failure on error).
  std::string Submit(const v1::JobSpec& spec);
  v1::Job GetJob(const std::string& job_id);
  // Registers a worker with 2 CPU slots, opens its session, submits a job of
  // one node x 2 CPU ranks and ticks: the job is STARTING, generation 1, and
  // the worker has its StartRanks in *start.
  std::string StartCpuJob(FakeWorker* worker, v1::StartRanks* start);
  // One NodeService.Session on `context` (its credential headers are the
  // caller's): opens (node_id, session_id), sends `message` and a heartbeat,
  // waits for the lease or the end; the stream's status.
  grpc::Status SessionSending(grpc::ClientContext* context, const std::string& node_id, int64_t session_id,
                              const v1::WorkerMessage& message);

  // Users, for tests of who may do what: writes a token file (mode 0600) of
  // `lines` ("<token> <user> [admin]") and makes it config_.token_file. Call
  // in SetUp, before CoordinatorFixture::SetUp.
  void UseTokenFile(const std::vector<std::string>& lines);
  // A call context presenting `token` as its bearer token (null: none).
  static std::unique_ptr<grpc::ClientContext> As(const char* token);

  FakeClock clock_;
  CoordinatorConfig config_;
  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::RendezvousService::Stub> rendezvous_;
  std::unique_ptr<v1::CheckpointService::Stub> checkpoints_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
};

}  // namespace ringmaster::coordinator::testing

#endif  // RINGMASTER_COORDINATOR_COORDINATOR_FIXTURE_H_
