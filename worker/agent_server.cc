#include "worker/agent_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/agent_service.grpc.pb.h"
#include "proto/checkpoint_service.grpc.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"
#include "common/grpc_security.h"
#include "spdlog/spdlog.h"
#include "worker/paths.h"

namespace ringmaster::worker {
namespace {

// One forwarded unary call: the trainer's deadline becomes the coordinator
// call's, the trainer's cancellation cancels it, and its status is the answer.
// While the coordinator is away (restarting) the call waits for the channel to
// come back, up to that deadline, instead of failing at once with UNAVAILABLE:
// a rank in rendezvous or committing a checkpoint rides out a coordinator
// restart. Waiting happens before the call is sent, so nothing is sent twice.
template <typename Request, typename Response>
class ForwardReactor : public grpc::ServerUnaryReactor {
 public:
  using Done = std::function<void(grpc::Status)>;
  using Method = std::function<void(grpc::ClientContext*, const Request*, Response*, Done)>;

  ForwardReactor(grpc::CallbackServerContext* server_context, Request request, Response* response, const Method& method)
      : request_(std::move(request)) {
    client_.set_deadline(server_context->deadline());
    client_.set_wait_for_ready(true);
    method(&client_, &request_, response, [this](grpc::Status status) { Finish(status); });
  }

  void OnCancel() override { client_.TryCancel(); }
  void OnDone() override { delete this; }

 private:
  grpc::ClientContext client_;
  Request request_;
};

template <typename Request, typename Response>
grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* context, Request request, Response* response,
                                  const typename ForwardReactor<Request, Response>::Method& method) {
  return new ForwardReactor<Request, Response>(context, std::move(request), response, method);
}

// One AgentService.Rejoin call: waits for the supervisor's answer
// (ProcessSupervisor::AwaitRejoin); a cancelled call (the trainer gave up)
// withdraws it. The answer and the cancellation may race: the first finishes.
class RejoinReactor : public grpc::ServerUnaryReactor {
 public:
  RejoinReactor(ProcessSupervisor* supervisor, const v1::RejoinRequest& request, v1::RejoinResponse* response)
      : supervisor_(supervisor), state_(std::make_shared<State>(this, response)) {
    token_ = supervisor_->AwaitRejoin(request.job_id(), request.generation(), request.global_rank(),
                                      [state = state_](absl::StatusOr<std::string> answer) {
                                        state->Finish(std::move(answer));
                                      });
  }

  void OnCancel() override {
    supervisor_->CancelRejoin(token_);
    std::shared_ptr<State> state = state_;  // Finish may end this reactor
    state->Finish(absl::CancelledError("the call was cancelled"));
  }
  void OnDone() override { delete this; }

 private:
  struct State {
    State(RejoinReactor* r, v1::RejoinResponse* out) : reactor(r), response(out) {}
    void Finish(absl::StatusOr<std::string> answer) {
      std::lock_guard<std::mutex> lock(mu);
      if (finished) return;
      finished = true;
      if (answer.ok()) {
        response->set_context_path(*answer);
        reactor->Finish(grpc::Status::OK);
      } else {
        reactor->Finish(grpc::Status(static_cast<grpc::StatusCode>(answer.status().code()),
                                     std::string(answer.status().message())));
      }
    }
    std::mutex mu;
    bool finished = false;
    RejoinReactor* const reactor;
    v1::RejoinResponse* const response;
  };

  ProcessSupervisor* const supervisor_;
  const std::shared_ptr<State> state_;
  uint64_t token_ = 0;
};

grpc::ServerUnaryReactor* Reject(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

// The secret the call presents (kRankSecretHeader).
std::string PresentedSecret(const grpc::CallbackServerContext& context) {
  auto it = context.client_metadata().find(kRankSecretHeader);
  return it == context.client_metadata().end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// PERMISSION_DENIED unless the call presents the secret the ranks of (job,
// generation) were started with: any local process reaches the socket, and
// only the job's own ranks read their rank.json.
grpc::Status CheckSecret(const ProcessSupervisor* supervisor, const grpc::CallbackServerContext& context,
                         const std::string& job_id, int64_t generation) {
  if (supervisor->HoldsSecret(job_id, generation, PresentedSecret(context))) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat(kRankSecretHeader, ": not the secret of job ", job_id, " generation ", generation,
                                   ": only the job's own ranks act for it (the secret is in their rank.json)"));
}

// Fills and fences a caller's (job, generation, rank).
grpc::Status Fence(const ProcessSupervisor* supervisor, std::string* job_id, int64_t* generation, int32_t rank) {
  CallerCheck check = supervisor->CheckCaller(*job_id, *generation, rank);
  if (check.state != CallerState::kCurrent) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, check.reason);
  }
  *job_id = check.job_id;
  *generation = check.generation;
  return grpc::Status::OK;
}

grpc::Status FenceScope(const ProcessSupervisor* supervisor, v1::RendezvousScope* scope) {
  std::string job_id = scope->job_id();
  int64_t generation = scope->generation();
  grpc::Status status = Fence(supervisor, &job_id, &generation, scope->rank());
  if (status.ok()) {
    scope->set_job_id(job_id);
    scope->set_generation(generation);
  }
  return status;
}

}  // namespace

class AgentServer::Services {
 public:
  Services(ProcessSupervisor* supervisor, WorkerMetrics* metrics, ProgressCallback on_progress,
           std::shared_ptr<grpc::Channel> coordinator)
      : agent_(supervisor, metrics, std::move(on_progress)),
        rendezvous_(supervisor, v1::RendezvousService::NewStub(coordinator)),
        checkpoint_(supervisor, metrics, v1::CheckpointService::NewStub(coordinator)) {}

  void Register(grpc::ServerBuilder* builder) {
    builder->RegisterService(&agent_);
    builder->RegisterService(&rendezvous_);
    builder->RegisterService(&checkpoint_);
  }

 private:
  class Agent : public v1::AgentService::CallbackService {
   public:
    Agent(ProcessSupervisor* supervisor, WorkerMetrics* metrics, ProgressCallback on_progress)
        : supervisor_(supervisor), metrics_(metrics), on_progress_(std::move(on_progress)) {}

    grpc::ServerUnaryReactor* ReportMetrics(grpc::CallbackServerContext* context,
                                            const v1::ReportMetricsRequest* request,
                                            v1::ReportMetricsResponse* response) override {
      CallerCheck check = supervisor_->CheckCaller(request->job_id(), request->generation(), request->global_rank());
      if (check.state == CallerState::kUnknown) {
        return Reject(context, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, check.reason));
      }
      if (check.state == CallerState::kCurrent) {
        if (grpc::Status s = CheckSecret(supervisor_, *context, check.job_id, check.generation); !s.ok()) {
          return Reject(context, s);
        }
      }
      response->set_stop(check.state == CallerState::kOver);
      response->set_checkpoint(check.checkpoint_requested);
      if (check.state == CallerState::kCurrent) {
        if (metrics_ != nullptr) {
          metrics_->RecordStep(check.job_id, check.generation, request->global_rank(), request->metrics());
        }
        if (on_progress_) {
          v1::RankProgress progress;
          progress.set_job_id(check.job_id);
          progress.set_generation(check.generation);
          progress.set_global_rank(request->global_rank());
          *progress.mutable_metrics() = request->metrics();
          on_progress_(progress);
        }
      }
      return Reject(context, grpc::Status::OK);
    }

    grpc::ServerUnaryReactor* Rejoin(grpc::CallbackServerContext* context, const v1::RejoinRequest* request,
                                     v1::RejoinResponse* response) override {
      if (request->job_id().empty() || request->generation() < 1) {
        return Reject(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                            "job_id and generation: required (the generation that ended)"));
      }
      if (grpc::Status s = CheckSecret(supervisor_, *context, request->job_id(), request->generation()); !s.ok()) {
        return Reject(context, s);
      }
      return new RejoinReactor(supervisor_, *request, response);
    }

   private:
    ProcessSupervisor* const supervisor_;
    WorkerMetrics* const metrics_;
    const ProgressCallback on_progress_;
  };

  class Rendezvous : public v1::RendezvousService::CallbackService {
   public:
    using Stub = v1::RendezvousService::Stub;
    Rendezvous(ProcessSupervisor* supervisor, std::unique_ptr<Stub> stub)
        : supervisor_(supervisor), stub_(std::move(stub)) {}

    grpc::ServerUnaryReactor* PublishNcclUniqueId(grpc::CallbackServerContext* context,
                                                  const v1::PublishNcclUniqueIdRequest* request,
                                                  v1::PublishNcclUniqueIdResponse* response) override {
      return Scoped(context, *request, response, [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->PublishNcclUniqueId(c, q, r, std::move(done));
      });
    }
    grpc::ServerUnaryReactor* GetNcclUniqueId(grpc::CallbackServerContext* context,
                                              const v1::GetNcclUniqueIdRequest* request,
                                              v1::GetNcclUniqueIdResponse* response) override {
      return Scoped(context, *request, response, [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->GetNcclUniqueId(c, q, r, std::move(done));
      });
    }
    grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context, const v1::KvSetRequest* request,
                                    v1::KvSetResponse* response) override {
      return Scoped(context, *request, response,
                    [this](auto* c, auto* q, auto* r, auto done) { stub_->async()->KvSet(c, q, r, std::move(done)); });
    }
    grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context, const v1::KvGetRequest* request,
                                    v1::KvGetResponse* response) override {
      return Scoped(context, *request, response,
                    [this](auto* c, auto* q, auto* r, auto done) { stub_->async()->KvGet(c, q, r, std::move(done)); });
    }
    grpc::ServerUnaryReactor* KvAdd(grpc::CallbackServerContext* context, const v1::KvAddRequest* request,
                                    v1::KvAddResponse* response) override {
      return Scoped(context, *request, response,
                    [this](auto* c, auto* q, auto* r, auto done) { stub_->async()->KvAdd(c, q, r, std::move(done)); });
    }
    grpc::ServerUnaryReactor* KvWait(grpc::CallbackServerContext* context, const v1::KvWaitRequest* request,
                                     v1::KvWaitResponse* response) override {
      return Scoped(context, *request, response,
                    [this](auto* c, auto* q, auto* r, auto done) { stub_->async()->KvWait(c, q, r, std::move(done)); });
    }

   private:
    // Fences the request's scope, then forwards it.
    template <typename Request, typename Response>
    grpc::ServerUnaryReactor* Scoped(grpc::CallbackServerContext* context, Request request, Response* response,
                                     const typename ForwardReactor<Request, Response>::Method& method) {
      if (grpc::Status s = FenceScope(supervisor_, request.mutable_scope()); !s.ok()) return Reject(context, s);
      return Forward(context, std::move(request), response, method);
    }

    ProcessSupervisor* const supervisor_;
    const std::unique_ptr<Stub> stub_;
  };

  class Checkpoint : public v1::CheckpointService::CallbackService {
   public:
    using Stub = v1::CheckpointService::Stub;
    Checkpoint(ProcessSupervisor* supervisor, WorkerMetrics* metrics, std::unique_ptr<Stub> stub)
        : supervisor_(supervisor), metrics_(metrics), stub_(std::move(stub)) {}

    grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* context, const v1::CommitCheckpointRequest* request,
                                     v1::CommitCheckpointResponse* response) override {
      v1::CommitCheckpointRequest forwarded = *request;
      std::string job_id = forwarded.job_id();
      int64_t generation = forwarded.generation();
      if (grpc::Status s = Fence(supervisor_, &job_id, &generation, forwarded.rank()); !s.ok()) {
        return Reject(context, s);
      }
      if (grpc::Status s = CheckSecret(supervisor_, *context, job_id, generation); !s.ok()) return Reject(context, s);
      forwarded.set_job_id(job_id);
      forwarded.set_generation(generation);
      if (metrics_ != nullptr) {  // the files are written whatever the coordinator answers
        int64_t bytes = 0;
        for (const v1::CheckpointFile& file : forwarded.files()) bytes += file.size_bytes();
        metrics_->RecordCheckpoint(job_id, generation, forwarded.rank(),
                                   forwarded.write_seconds() > 0 ? forwarded.write_seconds() : -1,
                                   forwarded.has_stall_seconds() ? forwarded.stall_seconds() : -1, bytes,
                                   forwarded.step());
      }
      return Forward(context, std::move(forwarded), response, [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->Commit(c, q, r, std::move(done));
      });
    }

    grpc::ServerUnaryReactor* ReportDamaged(grpc::CallbackServerContext* context,
                                            const v1::ReportDamagedCheckpointRequest* request,
                                            v1::ReportDamagedCheckpointResponse* response) override {
      v1::ReportDamagedCheckpointRequest forwarded = *request;
      std::string job_id = forwarded.job_id();
      int64_t generation = forwarded.generation();
      if (grpc::Status s = Fence(supervisor_, &job_id, &generation, forwarded.rank()); !s.ok()) {
        return Reject(context, s);
      }
      if (grpc::Status s = CheckSecret(supervisor_, *context, job_id, generation); !s.ok()) return Reject(context, s);
      forwarded.set_job_id(job_id);
      forwarded.set_generation(generation);
      return Forward(context, std::move(forwarded), response, [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->ReportDamaged(c, q, r, std::move(done));
      });
    }

    grpc::ServerUnaryReactor* GetLatestCheckpoint(grpc::CallbackServerContext* context,
                                                  const v1::GetLatestCheckpointRequest* request,
                                                  v1::GetLatestCheckpointResponse* response) override {
      v1::GetLatestCheckpointRequest forwarded = *request;
      if (forwarded.job_id().empty()) {  // the node's only job, if it has one
        CallerCheck check = supervisor_->CheckCaller("", 0, -1);
        if (check.job_id.empty()) {
          return Reject(context, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, check.reason));
        }
        forwarded.set_job_id(check.job_id);
      }
      // Any local process reaches this socket: it reads where a job's
      // checkpoints are, and their SHA-256s, only for a job running here.
      if (!supervisor_->RunsJob(forwarded.job_id())) {
        return Reject(context, grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                            absl::StrCat("job_id: job ", forwarded.job_id(),
                                                         " has no rank on this node: a trainer may read only its "
                                                         "own job's checkpoints")));
      }
      if (grpc::Status s = CheckSecret(supervisor_, *context, forwarded.job_id(), 0); !s.ok()) {
        return Reject(context, s);
      }
      return Forward(context, std::move(forwarded), response, [this](auto* c, auto* q, auto* r, auto done) {
        stub_->async()->GetLatestCheckpoint(c, q, r, std::move(done));
      });
    }

   private:
    ProcessSupervisor* const supervisor_;
    WorkerMetrics* const metrics_;  // may be null
    const std::unique_ptr<Stub> stub_;
  };

  Agent agent_;
  Rendezvous rendezvous_;
  Checkpoint checkpoint_;
};

AgentServer::AgentServer(ProcessSupervisor* supervisor, WorkerMetrics* metrics, ProgressCallback on_progress,
                         std::shared_ptr<grpc::Channel> coordinator, AgentServerOptions options)
    : options_(std::move(options)),
      services_(std::make_unique<Services>(supervisor, metrics, std::move(on_progress), std::move(coordinator))) {}

AgentServer::~AgentServer() { Stop(); }

absl::Status AgentServer::Start() {
  if (server_ != nullptr) return absl::FailedPreconditionError("agent server: already started");
  const std::string& path = options_.socket_path;
  if (path.empty() || path.size() > kMaxUnixSocketPath) {
    return absl::InvalidArgumentError(absl::StrCat("agent socket path must be 1 to ", kMaxUnixSocketPath,
                                                   " bytes, got ", path.size(), ": ", path,
                                                   " (use a shorter --state-dir)"));
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a socket"));
    }
    unlink(path.c_str());  // left by a worker that did not stop cleanly
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(target(), grpc::InsecureServerCredentials());  // local: see the class comment
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  services_->Register(&builder);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) return absl::UnavailableError(absl::StrCat("agent server: cannot listen on ", target()));
  if (chmod(path.c_str(), options_.socket_mode) != 0) {
    const int error = errno;
    Stop();
    return absl::PermissionDeniedError(absl::StrCat("cannot set the mode of ", path, " (chmod ",
                                                    absl::StrFormat("%o", options_.socket_mode), "): ",
                                                    std::strerror(error)));
  }
  spdlog::info("serving trainers on {}", target());
  return absl::OkStatus();
}

void AgentServer::Stop() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  server_.reset();
  unlink(options_.socket_path.c_str());
}

}  // namespace ringmaster::worker
