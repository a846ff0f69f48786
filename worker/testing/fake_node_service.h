#ifndef RINGMASTER_WORKER_TESTING_FAKE_NODE_SERVICE_H_
#define RINGMASTER_WORKER_TESTING_FAKE_NODE_SERVICE_H_

// FakeCoordinator: an in-process NodeService on 127.0.0.1 for the worker's
// tests. It records every call (registrations, session messages, exit
// reports, log lines, the node credential each call carried), answers each
// heartbeat with a lease, and sends what the test queues with Send() down the
// current session. A registration without a credential is issued
// `issued_credential`, as the coordinator issues a node's at its first. A test restarts the
// coordinator by destroying it and starting another on the same port.
// Thread-safe.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/node_service.grpc.pb.h"

namespace ringmaster::worker::testing {

class FakeNodeService final : public v1::NodeService::Service {
 public:
  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterNodeRequest* request,
                        v1::RegisterNodeResponse* response) override;
  grpc::Status Session(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) override;
  grpc::Status ReportRankExit(grpc::ServerContext* context, const v1::ReportRankExitRequest* request,
                              v1::ReportRankExitResponse* response) override;
  grpc::Status PushLogs(grpc::ServerContext* context, grpc::ServerReader<v1::LogChunk>* reader,
                        v1::PushLogsResponse* response) override;

  // Queues a message for the current (or next) session.
  void Send(const v1::CoordinatorMessage& message);
  // The next session ends at once with `status`.
  void RejectNextSession(grpc::Status status);
  // Register answers carry these stop orders (once).
  void StopOnRegister(std::vector<v1::StopRanks> stops);
  // While true, exit reports are answered UNAVAILABLE and not recorded.
  void RefuseExits(bool refuse);
  // While set, a PushLogs stream reads one chunk, drops it and ends with
  // this status (a coordinator under its disk reserve: RESOURCE_EXHAUSTED).
  void RefuseLogs(std::optional<grpc::Status> status);

  std::vector<v1::RegisterNodeRequest> registrations() const;
  std::vector<v1::WorkerMessage> messages() const;  // every session message, in order
  std::vector<v1::ReportRankExitRequest> exits() const;
  std::vector<v1::LogLine> log_lines() const;
  std::vector<std::string> log_node_ids() const;  // "ringmaster-node-id" of each PushLogs stream
  // (method, its x-ringmaster-node-credential header or "") of every call, in order.
  std::vector<std::pair<std::string, std::string>> credentials() const;
  int heartbeats() const;
  // Exit reports answered UNAVAILABLE while RefuseExits(true).
  int refused_exits() const;
  // The first start_result / heartbeat matching `pred`, if any.
  std::optional<v1::StartRanksResult> StartResult(const std::string& job_id, int64_t generation) const;
  bool HeartbeatWith(const std::function<bool(const v1::Heartbeat&)>& pred) const;

  absl::Duration heartbeat_interval = absl::Milliseconds(50);
  absl::Duration lease_duration = absl::Milliseconds(300);
  std::string issued_credential = std::string(64, 'c');

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t next_session_ = 100;
  int64_t current_session_ = 0;
  std::deque<v1::CoordinatorMessage> outgoing_;
  std::optional<grpc::Status> reject_next_;
  std::vector<v1::StopRanks> register_stops_;
  bool refuse_exits_ = false;
  int refused_exits_ = 0;
  std::optional<grpc::Status> refuse_logs_;
  std::vector<v1::RegisterNodeRequest> registrations_;
  std::vector<v1::WorkerMessage> messages_;
  std::vector<v1::ReportRankExitRequest> exits_;
  std::vector<v1::LogLine> log_lines_;
  std::vector<std::string> log_node_ids_;
  std::vector<std::pair<std::string, std::string>> credentials_;

  void RecordCredential(const grpc::ServerContext& context, const std::string& method);  // with mu_ held
};

class FakeCoordinator {
 public:
  // Listens on 127.0.0.1:`port` (0: any free port); refuse_exits: see
  // FakeNodeService::RefuseExits, from the first call on.
  explicit FakeCoordinator(int port = 0, bool refuse_exits = false);
  ~FakeCoordinator();

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeNodeService& service() { return service_; }
  // Ends every call (streams too) and stops listening.
  void Shutdown();

 private:
  FakeNodeService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace ringmaster::worker::testing

#endif  // RINGMASTER_WORKER_TESTING_FAKE_NODE_SERVICE_H_
