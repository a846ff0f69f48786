#ifndef RINGMASTER_COORDINATOR_JOB_SERVICE_H_
#define RINGMASTER_COORDINATOR_JOB_SERVICE_H_

// JobService: the gRPC adapter of ringmaster.v1.JobService (what the CLI
// calls). Converts requests to the JobController's calls and absl::Status to
// gRPC codes one to one; owns no state.
//
//   Submit, CancelJob, CordonNode, DrainNode: unary; they write the store, so
//     their work runs on the executor and the call finishes from there
//     (finish_on_executor.h). Submit and CancelJob poke the scheduler.
//   GetJob, ListJobs, ListNodes, ListCheckpoints, ListQueues: unary,
//     answered inline (reads, short).
//   GetUsage: unary, inline: one read-only query of the store (Accounting).
//   WatchJob: a WatchJobReactor (watch_job_reactor.h).
//   StreamLogs: a StreamLogsReactor (stream_logs_reactor.h).
//
// Who reads what (auth.h, AuthorizeRead, with `visibility` and the queues in
// force): GetJob, WatchJob, StreamLogs and ListCheckpoints answer
// PERMISSION_DENIED to a caller who may not read the job; ListJobs lists
// every job but hides the spec of those (HideSpec, JobSummary.spec_hidden).
//
// Thread-safe: the collaborators are; they must outlive the server.

#include <functional>

#include "coordinator/core/accounting.h"
#include "coordinator/core/auth.h"
#include "coordinator/core/executor.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/job_watchers.h"
#include "coordinator/store/log_store.h"
#include "coordinator/core/node_registry.h"
#include "coordinator/service/stream_logs_reactor.h"
#include "grpcpp/grpcpp.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::coordinator {

class JobService final : public v1::JobService::CallbackService {
 public:
  // `poke` asks for a scheduling pass soon (may be empty).
  JobService(JobController* controller, const NodeRegistry* nodes, JobWatchers* watchers, LogStore* logs,
             const Accounting* accounting, Executor* executor, std::function<void()> poke, Visibility visibility,
             StreamLogsOptions log_options = {});

  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* context, const v1::SubmitJobRequest* request,
                                   v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
                                   v1::GetJobResponse* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context, const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context, const v1::CancelJobRequest* request,
                                      v1::CancelJobResponse* response) override;
  grpc::ServerWriteReactor<v1::LogChunk>* StreamLogs(grpc::CallbackServerContext* context,
                                                     const v1::StreamLogsRequest* request) override;
  grpc::ServerWriteReactor<v1::WatchJobResponse>* WatchJob(grpc::CallbackServerContext* context,
                                                           const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context, const v1::ListNodesRequest* request,
                                      v1::ListNodesResponse* response) override;
  grpc::ServerUnaryReactor* CordonNode(grpc::CallbackServerContext* context, const v1::CordonNodeRequest* request,
                                       v1::CordonNodeResponse* response) override;
  grpc::ServerUnaryReactor* DrainNode(grpc::CallbackServerContext* context, const v1::DrainNodeRequest* request,
                                      v1::DrainNodeResponse* response) override;
  grpc::ServerUnaryReactor* ListCheckpoints(grpc::CallbackServerContext* context,
                                            const v1::ListCheckpointsRequest* request,
                                            v1::ListCheckpointsResponse* response) override;
  grpc::ServerUnaryReactor* ListQueues(grpc::CallbackServerContext* context, const v1::ListQueuesRequest* request,
                                       v1::ListQueuesResponse* response) override;
  grpc::ServerUnaryReactor* GetUsage(grpc::CallbackServerContext* context, const v1::GetUsageRequest* request,
                                     v1::GetUsageResponse* response) override;

 private:
  // AuthorizeRead of `job` with the queues in force.
  absl::Status CanRead(const Caller& caller, const v1::Job& job) const;
  // The same for the streams' reactors, which check the job they read.
  std::function<absl::Status(const v1::Job&)> ReadCheck(const Caller& caller) const;

  JobController* const controller_;
  const NodeRegistry* const nodes_;
  JobWatchers* const watchers_;
  LogStore* const logs_;
  const Accounting* const accounting_;
  Executor* const executor_;
  const std::function<void()> poke_;
  const Visibility visibility_;
  const StreamLogsOptions log_options_;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_JOB_SERVICE_H_
