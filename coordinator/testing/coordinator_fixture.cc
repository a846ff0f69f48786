#include "coordinator/testing/coordinator_fixture.h"

#include <sys/stat.h>

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_security.h"
#include "common/proto_time.h"
#include "coordinator/testing/test_util.h"

namespace ringmaster::coordinator::testing {

std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

// ---- FakeWorker ----

FakeWorker::FakeWorker(std::shared_ptr<grpc::Channel> channel, v1::NodeInfo node)
    : stub_(v1::NodeService::NewStub(channel)), node_(std::move(node)) {}

FakeWorker::~FakeWorker() {
  if (session_context_ != nullptr) session_context_->TryCancel();
  if (reader_.joinable()) reader_.join();
  if (stream_ != nullptr && !finished_.has_value()) stream_->Finish().ok();
}

grpc::Status FakeWorker::Register(const std::vector<v1::RunningRank>& running) {
  v1::RegisterNodeRequest request;
  *request.mutable_node() = node_;
  request.mutable_node()->set_node_id(node_id_);
  for (const v1::RunningRank& r : running) *request.add_running_ranks() = r;
  grpc::Status status = stub_->Register(NodeContext().get(), request, &registration_);
  if (status.ok()) {
    node_id_ = registration_.node_id();
    session_id_ = registration_.session_id();
    if (!registration_.credential().empty()) credential_ = registration_.credential();
  }
  return status;
}

std::unique_ptr<grpc::ClientContext> FakeWorker::NodeContext(absl::Duration timeout) const {
  std::unique_ptr<grpc::ClientContext> context = Context(timeout);
  if (!credential_.empty()) context->AddMetadata(kNodeCredentialHeader, credential_);
  return context;
}

bool FakeWorker::Open(std::optional<int64_t> session_id) {
  session_context_ = NodeContext(absl::Minutes(2));
  stream_ = stub_->Session(session_context_.get());
  reader_ = std::thread([this] { ReadLoop(); });
  v1::WorkerMessage open;
  open.mutable_open()->set_node_id(node_id_);
  open.mutable_open()->set_session_id(session_id.value_or(session_id_));
  return stream_->Write(open);
}

bool FakeWorker::Send(const v1::WorkerMessage& message) { return stream_->Write(message); }

bool FakeWorker::Heartbeat() {
  v1::WorkerMessage message;
  *message.mutable_heartbeat()->mutable_time() = ToProtoTime(absl::Now());
  return Send(message);
}

bool FakeWorker::Progress(const std::string& job_id, int64_t generation, int32_t rank, int64_t step) {
  v1::WorkerMessage message;
  v1::RankProgress* p = message.mutable_progress();
  p->set_job_id(job_id);
  p->set_generation(generation);
  p->set_global_rank(rank);
  p->mutable_metrics()->set_step(step);
  p->mutable_metrics()->set_loss(1.0 / static_cast<double>(step + 1));
  return Send(message);
}

void FakeWorker::ReadLoop() {
  v1::CoordinatorMessage message;
  while (stream_->Read(&message)) {
    std::lock_guard<std::mutex> lock(mu_);
    received_.push_back(message);
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  stream_ended_ = true;
  cv_.notify_all();
}

std::optional<v1::CoordinatorMessage> FakeWorker::Next(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return !received_.empty() || stream_ended_; });
  if (received_.empty()) return std::nullopt;
  v1::CoordinatorMessage message = std::move(received_.front());
  received_.pop_front();
  return message;
}

std::optional<v1::CoordinatorMessage> FakeWorker::NextOrder(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<v1::CoordinatorMessage> order;
  cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    for (auto it = received_.begin(); it != received_.end(); ++it) {
      if (!it->has_lease()) {
        order = std::move(*it);
        received_.erase(it);
        return true;
      }
    }
    return stream_ended_;
  });
  return order;
}

std::optional<v1::LeaseGrant> FakeWorker::Sync() {
  if (!Heartbeat()) return std::nullopt;
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<v1::LeaseGrant> lease;
  cv_.wait_for(lock, absl::ToChronoNanoseconds(kRpcTimeout), [&] {
    for (auto it = received_.begin(); it != received_.end(); ++it) {
      if (it->has_lease()) {
        lease = it->lease();
        received_.erase(it);
        return true;
      }
    }
    return stream_ended_;
  });
  return lease;
}

grpc::Status FakeWorker::Finish(bool close) {
  if (close) stream_->WritesDone();
  if (reader_.joinable()) reader_.join();
  finished_ = stream_->Finish();
  return *finished_;
}

grpc::Status FakeWorker::ReportExit(const std::string& job_id, int64_t generation, int32_t rank, int32_t exit_code) {
  v1::ReportRankExitRequest request;
  request.set_node_id(node_id_);
  request.set_job_id(job_id);
  request.set_generation(generation);
  request.set_global_rank(rank);
  request.set_exit_code(exit_code);
  v1::ReportRankExitResponse response;
  return stub_->ReportRankExit(NodeContext().get(), request, &response);
}

// ---- CoordinatorFixture ----

void CoordinatorFixture::SetUp() {
  config_.listen = "127.0.0.1:0";
  config_.state_dir = NewTempDir("coordinator");
  config_.metrics_listen = "127.0.0.1:0";
  config_.heartbeat_interval = absl::Seconds(1);
  config_.rendezvous_timeout = absl::Minutes(5);
  config_.stop_grace_period = absl::Seconds(30);
  config_.tick_interval = absl::ZeroDuration();  // the test ticks
  config_.shutdown_timeout = absl::Seconds(2);
  config_.log_follow_linger = absl::Seconds(1);
  StartServer();
}

void CoordinatorFixture::TearDown() { StopServer(); }

void CoordinatorFixture::StartServer() {
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(config_, &clock_);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials());
  jobs_ = v1::JobService::NewStub(channel_);
  rendezvous_ = v1::RendezvousService::NewStub(channel_);
  checkpoints_ = v1::CheckpointService::NewStub(channel_);
  nodes_ = v1::NodeService::NewStub(channel_);
}

void CoordinatorFixture::StopServer() {
  if (server_ != nullptr) server_->Shutdown();
  server_.reset();
}

std::unique_ptr<FakeWorker> CoordinatorFixture::NewWorker(const std::string& hostname, int cpu_slots) {
  return std::make_unique<FakeWorker>(channel_, MakeNode(hostname, 0, cpu_slots));
}

std::string CoordinatorFixture::Submit(const v1::JobSpec& spec) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitJobResponse response;
  grpc::Status status = jobs_->Submit(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.job().id();
}

v1::Job CoordinatorFixture::GetJob(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::GetJobResponse response;
  grpc::Status status = jobs_->GetJob(Context().get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.job();
}

std::string CoordinatorFixture::StartCpuJob(FakeWorker* worker, v1::StartRanks* start) {
  EXPECT_TRUE(worker->Register().ok());
  EXPECT_TRUE(worker->Open());
  EXPECT_TRUE(worker->Sync().has_value());  // the session is attached
  const std::string job_id = Submit(MakeSpec(1, 2, v1::ResourceSpec::CPU));
  server_->Tick();
  std::optional<v1::CoordinatorMessage> order = worker->NextOrder();
  EXPECT_TRUE(order.has_value() && order->has_start()) << (order ? order->DebugString() : "no message");
  if (order.has_value()) *start = order->start();
  return job_id;
}

grpc::Status CoordinatorFixture::SessionSending(grpc::ClientContext* context, const std::string& node_id,
                                               int64_t session_id, const v1::WorkerMessage& message) {
  auto stream = nodes_->Session(context);
  v1::WorkerMessage open;
  open.mutable_open()->set_node_id(node_id);
  open.mutable_open()->set_session_id(session_id);
  v1::WorkerMessage heartbeat;
  *heartbeat.mutable_heartbeat()->mutable_time() = ToProtoTime(absl::Now());
  if (stream->Write(open) && stream->Write(message) && stream->Write(heartbeat)) {
    v1::CoordinatorMessage reply;
    while (stream->Read(&reply) && !reply.has_lease()) {
    }
  }
  stream->WritesDone();
  v1::CoordinatorMessage rest;
  while (stream->Read(&rest)) {
  }
  return stream->Finish();
}

void CoordinatorFixture::UseTokenFile(const std::vector<std::string>& lines) {
  const std::string path = NewTempDir("tokens") + "/tokens";
  std::ofstream out(path);
  for (const std::string& line : lines) out << line << "\n";
  out.close();
  chmod(path.c_str(), 0600);
  config_.token_file = path;
}

std::unique_ptr<grpc::ClientContext> CoordinatorFixture::As(const char* token) {
  std::unique_ptr<grpc::ClientContext> context = Context();
  if (token != nullptr) context->AddMetadata("authorization", std::string("Bearer ") + token);
  return context;
}

}  // namespace ringmaster::coordinator::testing
