#include "client/fake_job_service.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ringmaster::client {

grpc::Status FakeJobService::Submit(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                                    v1::SubmitJobResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.submit.push_back(*request);
  if (!script_.submit_status.ok()) return script_.submit_status;
  *response = script_.submit;
  return grpc::Status::OK;
}

grpc::Status FakeJobService::GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                                    v1::GetJobResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.get.push_back(*request);
  if (!script_.get_status.ok()) return script_.get_status;
  auto page = script_.get_pages.find(request->events_page_token());
  *response = page != script_.get_pages.end() ? page->second : script_.get;
  return grpc::Status::OK;
}

grpc::Status FakeJobService::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.list_jobs.push_back(*request);
  if (!script_.list_jobs_status.ok()) return script_.list_jobs_status;
  size_t page = 0;
  if (!request->page_token().empty()) {
    absl::string_view token = request->page_token();
    if (!absl::ConsumePrefix(&token, "page-") || !absl::SimpleAtoi(token, &page) ||
        page >= script_.list_jobs_pages.size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "page_token: unknown");
    }
  }
  *response = script_.list_jobs_pages[page];
  if (page + 1 < script_.list_jobs_pages.size()) response->set_next_page_token(absl::StrCat("page-", page + 1));
  return grpc::Status::OK;
}

grpc::Status FakeJobService::CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                                       v1::CancelJobResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.cancel.push_back(*request);
  if (auto it = script_.cancel_statuses.find(request->job_id()); it != script_.cancel_statuses.end()) {
    if (!it->second.ok()) return it->second;
  } else if (!script_.cancel_status.ok()) {
    return script_.cancel_status;
  }
  *response = script_.cancel;
  return grpc::Status::OK;
}

grpc::Status FakeJobService::StreamLogs(grpc::ServerContext*, const v1::StreamLogsRequest* request,
                                        grpc::ServerWriter<v1::LogChunk>* writer) {
  std::vector<v1::LogChunk> chunks;
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.logs.push_back(*request);
    chunks = script_.log_chunks;
    status = script_.logs_status;
  }
  for (const v1::LogChunk& chunk : chunks) writer->Write(chunk);
  return status;
}

grpc::Status FakeJobService::WatchJob(grpc::ServerContext*, const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::WatchJobResponse>* writer) {
  std::vector<v1::WatchJobResponse> stream;
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t call = calls_.watch.size();
    calls_.watch.push_back(*request);
    if (!script_.watch_streams.empty()) {
      stream = script_.watch_streams[std::min(call, script_.watch_streams.size() - 1)];
    }
    if (call < script_.watch_statuses.size()) status = script_.watch_statuses[call];
  }
  for (const v1::WatchJobResponse& response : stream) writer->Write(response);
  return status;
}

grpc::Status FakeJobService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                                       v1::ListNodesResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_.list_nodes;
  if (!script_.list_nodes_status.ok()) return script_.list_nodes_status;
  *response = script_.list_nodes;
  return grpc::Status::OK;
}

grpc::Status FakeJobService::CordonNode(grpc::ServerContext*, const v1::CordonNodeRequest* request,
                                        v1::CordonNodeResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.cordon.push_back(*request);
  if (!script_.cordon_status.ok()) return script_.cordon_status;
  *response = script_.cordon;
  return grpc::Status::OK;
}

grpc::Status FakeJobService::DrainNode(grpc::ServerContext*, const v1::DrainNodeRequest* request,
                                       v1::DrainNodeResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.drain.push_back(*request);
  if (!script_.drain_status.ok()) return script_.drain_status;
  *response = script_.drain;
  return grpc::Status::OK;
}

grpc::Status FakeJobService::ListCheckpoints(grpc::ServerContext*, const v1::ListCheckpointsRequest* request,
                                             v1::ListCheckpointsResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.checkpoints.push_back(*request);
  if (!script_.checkpoints_status.ok()) return script_.checkpoints_status;
  *response = script_.checkpoints;
  return grpc::Status::OK;
}

grpc::Status FakeJobService::GetUsage(grpc::ServerContext*, const v1::GetUsageRequest* request,
                                      v1::GetUsageResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.usage.push_back(*request);
  if (!script_.usage_status.ok()) return script_.usage_status;
  *response = script_.usage;
  return grpc::Status::OK;
}

FakeCoordinator::FakeCoordinator() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
  address_ = absl::StrCat("127.0.0.1:", port);
}

FakeCoordinator::~FakeCoordinator() { server_->Shutdown(std::chrono::system_clock::now()); }

std::unique_ptr<v1::JobService::Stub> FakeCoordinator::NewStub() const {
  return v1::JobService::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
}

std::string ClosedAddress() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
}

}  // namespace ringmaster::client
