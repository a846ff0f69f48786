#include "worker/testing/fake_node_service.h"

#include <thread>

#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/proto_time.h"

namespace ringmaster::worker::testing {

void FakeNodeService::RecordCredential(const grpc::ServerContext& context, const std::string& method) {
  auto it = context.client_metadata().find(kNodeCredentialHeader);
  credentials_.emplace_back(method, it == context.client_metadata().end()
                                        ? std::string()
                                        : std::string(it->second.data(), it->second.size()));
}

std::vector<std::pair<std::string, std::string>> FakeNodeService::credentials() const {
  std::lock_guard<std::mutex> lock(mu_);
  return credentials_;
}

grpc::Status FakeNodeService::Register(grpc::ServerContext* context, const v1::RegisterNodeRequest* request,
                                       v1::RegisterNodeResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  RecordCredential(*context, "Register");
  if (credentials_.back().second.empty()) response->set_credential(issued_credential);
  registrations_.push_back(*request);
  response->set_node_id(request->node().node_id().empty() ? "node-1" : request->node().node_id());
  current_session_ = ++next_session_;
  response->set_session_id(current_session_);
  *response->mutable_lease_duration() = ToProtoDuration(lease_duration);
  *response->mutable_heartbeat_interval() = ToProtoDuration(heartbeat_interval);
  for (const v1::StopRanks& stop : register_stops_) *response->add_stop() = stop;
  register_stops_.clear();
  cv_.notify_all();
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::Session(grpc::ServerContext* context,
                                      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) {
  v1::WorkerMessage first;
  if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::CANCELLED, "no open message");
  {
    std::lock_guard<std::mutex> lock(mu_);
    RecordCredential(*context, "Session");
    messages_.push_back(first);
    if (!first.has_open()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first message must be open");
    if (reject_next_.has_value()) {
      grpc::Status status = *reject_next_;
      reject_next_.reset();
      return status;
    }
    if (first.open().session_id() != current_session_) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "not the node's current session");
    }
  }
  bool reader_done = false;
  std::deque<v1::CoordinatorMessage> leases;
  std::thread reader([&] {
    v1::WorkerMessage message;
    while (stream->Read(&message)) {
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(message);
      if (message.has_heartbeat()) {
        v1::CoordinatorMessage lease;
        *lease.mutable_lease()->mutable_expiry() = ToProtoTime(absl::Now() + lease_duration);
        leases.push_back(lease);
      }
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    reader_done = true;
    cv_.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu_);
  while (!reader_done && !context->IsCancelled()) {
    cv_.wait_for(lock, std::chrono::milliseconds(10));
    std::vector<v1::CoordinatorMessage> batch(leases.begin(), leases.end());
    leases.clear();
    batch.insert(batch.end(), outgoing_.begin(), outgoing_.end());
    outgoing_.clear();
    lock.unlock();
    for (const v1::CoordinatorMessage& message : batch) stream->Write(message);
    lock.lock();
  }
  lock.unlock();
  reader.join();
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::ReportRankExit(grpc::ServerContext* context, const v1::ReportRankExitRequest* request,
                                             v1::ReportRankExitResponse*) {
  std::lock_guard<std::mutex> lock(mu_);
  RecordCredential(*context, "ReportRankExit");
  if (refuse_exits_) {
    ++refused_exits_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "refusing exit reports");
  }
  exits_.push_back(*request);
  cv_.notify_all();
  return grpc::Status::OK;
}

grpc::Status FakeNodeService::PushLogs(grpc::ServerContext* context, grpc::ServerReader<v1::LogChunk>* reader,
                                       v1::PushLogsResponse*) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    RecordCredential(*context, "PushLogs");
    auto it = context->client_metadata().find("ringmaster-node-id");
    log_node_ids_.push_back(it == context->client_metadata().end() ? ""
                                                                   : std::string(it->second.data(), it->second.size()));
  }
  v1::LogChunk chunk;
  while (reader->Read(&chunk)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (refuse_logs_.has_value()) return *refuse_logs_;
    for (const v1::LogLine& line : chunk.lines()) log_lines_.push_back(line);
    cv_.notify_all();
  }
  return grpc::Status::OK;
}

void FakeNodeService::RefuseLogs(std::optional<grpc::Status> status) {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_logs_ = std::move(status);
}

void FakeNodeService::Send(const v1::CoordinatorMessage& message) {
  std::lock_guard<std::mutex> lock(mu_);
  outgoing_.push_back(message);
  cv_.notify_all();
}

void FakeNodeService::RejectNextSession(grpc::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  reject_next_ = std::move(status);
}

void FakeNodeService::RefuseExits(bool refuse) {
  std::lock_guard<std::mutex> lock(mu_);
  refuse_exits_ = refuse;
}

void FakeNodeService::StopOnRegister(std::vector<v1::StopRanks> stops) {
  std::lock_guard<std::mutex> lock(mu_);
  register_stops_ = std::move(stops);
}

std::vector<v1::RegisterNodeRequest> FakeNodeService::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

std::vector<v1::WorkerMessage> FakeNodeService::messages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_;
}

std::vector<v1::ReportRankExitRequest> FakeNodeService::exits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exits_;
}

std::vector<v1::LogLine> FakeNodeService::log_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_lines_;
}

std::vector<std::string> FakeNodeService::log_node_ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_node_ids_;
}

int FakeNodeService::refused_exits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_exits_;
}

int FakeNodeService::heartbeats() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const v1::WorkerMessage& m : messages_) n += m.has_heartbeat() ? 1 : 0;
  return n;
}

std::optional<v1::StartRanksResult> FakeNodeService::StartResult(const std::string& job_id, int64_t generation) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const v1::WorkerMessage& m : messages_) {
    if (m.has_start_result() && m.start_result().job_id() == job_id && m.start_result().generation() == generation) {
      return m.start_result();
    }
  }
  return std::nullopt;
}

bool FakeNodeService::HeartbeatWith(const std::function<bool(const v1::Heartbeat&)>& pred) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const v1::WorkerMessage& m : messages_) {
    if (m.has_heartbeat() && pred(m.heartbeat())) return true;
  }
  return false;
}

FakeCoordinator::FakeCoordinator(int port, bool refuse_exits) {
  service_.RefuseExits(refuse_exits);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
}

FakeCoordinator::~FakeCoordinator() { Shutdown(); }

void FakeCoordinator::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  server_->Wait();
  server_.reset();
}

}  // namespace ringmaster::worker::testing
