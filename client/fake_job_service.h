#ifndef RINGMASTER_CLIENT_FAKE_JOB_SERVICE_H_
#define RINGMASTER_CLIENT_FAKE_JOB_SERVICE_H_

// FakeJobService: a JobService that returns what the test scripted and
// records every request; FakeCoordinator serves it (and gRPC health
// checking) on 127.0.0.1:0 in the test process. Tests script it before
// issuing calls and read the records after them.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::client {

class FakeJobService final : public v1::JobService::Service {
 public:
  // --- Script: responses, or an error status instead. ---
  struct Script {
    grpc::Status submit_status;
    v1::SubmitJobResponse submit;
    grpc::Status get_status;
    v1::GetJobResponse get;
    // GetJob with events_page_token T gets get_pages[T] when it is there
    // (the older pages of a timeline), else `get`.
    std::map<std::string, v1::GetJobResponse> get_pages;
    grpc::Status list_jobs_status;
    // Page i is returned for page token "" (i = 0) or "page-i"; every page
    // but the last gets next_page_token "page-(i+1)".
    std::vector<v1::ListJobsResponse> list_jobs_pages = {v1::ListJobsResponse()};
    grpc::Status cancel_status;
    // By job id, instead of cancel_status for that job.
    std::map<std::string, grpc::Status> cancel_statuses;
    v1::CancelJobResponse cancel;
    grpc::Status list_nodes_status;
    v1::ListNodesResponse list_nodes;
    grpc::Status checkpoints_status;
    v1::ListCheckpointsResponse checkpoints;
    grpc::Status cordon_status;
    v1::CordonNodeResponse cordon;
    grpc::Status drain_status;
    v1::DrainNodeResponse drain;
    grpc::Status usage_status;
    v1::GetUsageResponse usage;
    // StreamLogs sends these chunks, then ends with logs_status.
    std::vector<v1::LogChunk> log_chunks;
    grpc::Status logs_status;
    // WatchJob: the i-th call sends watch_streams[i] (the last one again
    // when there are fewer), then ends with watch_statuses[i] (OK if absent).
    std::vector<std::vector<v1::WatchJobResponse>> watch_streams;
    std::vector<grpc::Status> watch_statuses;
  };

  // --- Records. ---
  struct Calls {
    std::vector<v1::SubmitJobRequest> submit;
    std::vector<v1::GetJobRequest> get;
    std::vector<v1::ListJobsRequest> list_jobs;
    std::vector<v1::CancelJobRequest> cancel;
    std::vector<v1::StreamLogsRequest> logs;
    std::vector<v1::WatchJobRequest> watch;
    int list_nodes = 0;
    std::vector<v1::ListCheckpointsRequest> checkpoints;
    std::vector<v1::CordonNodeRequest> cordon;
    std::vector<v1::DrainNodeRequest> drain;
    std::vector<v1::GetUsageRequest> usage;
  };

  Script& script() { return script_; }
  Calls calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

  grpc::Status Submit(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                      v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request, v1::GetJobResponse* response) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;
  grpc::Status StreamLogs(grpc::ServerContext*, const v1::StreamLogsRequest* request,
                          grpc::ServerWriter<v1::LogChunk>* writer) override;
  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::WatchJobResponse>* writer) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest* request,
                         v1::ListNodesResponse* response) override;
  grpc::Status ListCheckpoints(grpc::ServerContext*, const v1::ListCheckpointsRequest* request,
                               v1::ListCheckpointsResponse* response) override;
  grpc::Status CordonNode(grpc::ServerContext*, const v1::CordonNodeRequest* request,
                          v1::CordonNodeResponse* response) override;
  grpc::Status DrainNode(grpc::ServerContext*, const v1::DrainNodeRequest* request,
                         v1::DrainNodeResponse* response) override;
  grpc::Status GetUsage(grpc::ServerContext*, const v1::GetUsageRequest* request,
                        v1::GetUsageResponse* response) override;

 private:
  std::mutex mu_;
  Script script_;
  Calls calls_;
};

// A gRPC server on 127.0.0.1:0 serving a FakeJobService and health checking
// (SERVING). Stops when destroyed.
class FakeCoordinator {
 public:
  FakeCoordinator();
  ~FakeCoordinator();

  FakeJobService& service() { return service_; }
  const std::string& address() const { return address_; }
  // A client stub over a new channel to address().
  std::unique_ptr<v1::JobService::Stub> NewStub() const;

 private:
  FakeJobService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

// An address where nothing listens (a port that was bound, then closed).
std::string ClosedAddress();

}  // namespace ringmaster::client

#endif  // RINGMASTER_CLIENT_FAKE_JOB_SERVICE_H_
