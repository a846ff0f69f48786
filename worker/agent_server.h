#ifndef RINGMASTER_WORKER_AGENT_SERVER_H_
#define RINGMASTER_WORKER_AGENT_SERVER_H_

// AgentServer: the gRPC server the node's trainers talk to, on a Unix-domain
// socket (unix:<state-dir>/agent.sock, mode socket_mode: 0600 in the
// worker's 0700 state directory, or 0666 in its 0711 one when ranks run as
// other accounts; Start fails if it cannot set the mode). An adapter:
//   - AgentService.ReportMetrics: a running rank's step metrics go to the
//     WorkerMetrics and, as RankProgress, to `on_progress` (the session relays
//     them). A rank whose generation is over gets stop=true; one whose
//     generation the coordinator asked for a checkpoint (a drain) gets
//     checkpoint=true.
//   - AgentService.Rejoin: a rank whose generation ended asks to carry on in
//     the next one in its process (ProcessSupervisor::AwaitRejoin); the call
//     presents the ending generation's secret and waits for the answer.
//   - CheckpointService.Commit also records the checkpoint's write time and
//     size in the WorkerMetrics.
//   - RendezvousService and CheckpointService: forwarded to the coordinator
//     unchanged but for the caller's scope, which the worker fills (an empty
//     job id: the node's only job; generation 0: the job's current one) and
//     fences with ProcessSupervisor::CheckCaller. A trainer of an older
//     generation, or one being stopped, gets FAILED_PRECONDITION ("generation
//     3 is over; current is 4") without the coordinator being asked; one this
//     node does not run gets FAILED_PRECONDITION too. The coordinator's answer
//     (status code and message) is passed through; a coordinator that cannot
//     be reached is UNAVAILABLE. The caller's deadline and cancellation carry
//     over to the forwarded call.
// Handlers use the callback API and never block: forwarding uses the
// stub's callback API (a KvWait may wait minutes).
//
// Thread-safe. Start/Stop from one thread.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "proto/node_service.pb.h"
#include "worker/process_supervisor.h"
#include "worker/worker_metrics.h"

namespace ringmaster::worker {

struct AgentServerOptions {
  // Path of the socket (without "unix:"); at most kMaxUnixSocketPath bytes.
  // A stale socket file there is removed.
  std::string socket_path;
  // The socket's mode: 0600 (the worker's user only) when ranks run as the
  // worker; 0666 when they run as other accounts (--run-as), which must
  // connect (docs/security.md: every call is fenced by job, generation and
  // rank, and the rendezvous needs the generation's secret).
  mode_t socket_mode = 0600;
};

class AgentServer {
 public:
  using ProgressCallback = std::function<void(const v1::RankProgress&)>;

  // `supervisor` must outlive the server; `metrics` may be null;
  // `coordinator` is the channel calls are forwarded on.
  AgentServer(ProcessSupervisor* supervisor, WorkerMetrics* metrics, ProgressCallback on_progress,
              std::shared_ptr<grpc::Channel> coordinator, AgentServerOptions options);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  // Binds the socket and serves. INVALID_ARGUMENT for a path too long for a
  // Unix socket; FAILED_PRECONDITION if something that is not a socket is in
  // the way; UNAVAILABLE if the server cannot bind.
  absl::Status Start();
  // Cancels calls in flight (after a short grace), stops serving and removes
  // the socket. Idempotent.
  void Stop();

  // "unix:<path>" — what trainers dial.
  std::string target() const { return "unix:" + options_.socket_path; }

 private:
  class Services;

  const AgentServerOptions options_;
  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_AGENT_SERVER_H_
