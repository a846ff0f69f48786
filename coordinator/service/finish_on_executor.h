#ifndef RINGMASTER_COORDINATOR_FINISH_ON_EXECUTOR_H_
#define RINGMASTER_COORDINATOR_FINISH_ON_EXECUTOR_H_

// FinishOnExecutor: how a unary handler that writes the store answers. Its
// work (a SQLite transaction, which may wait on the disk or on the database's
// lock) runs on an Executor, never on gRPC's callback threads, and the call
// finishes from there with the work's status, so that a slow write never
// holds up other calls. The request, the response and the context stay valid
// until the reactor finishes; the work may use them.
//
// During shutdown the server waits for its calls before the executor is shut
// down (CoordinatorServer::Shutdown), so a task posted for a call always
// runs; an executor that refuses the task (shut down) finishes the call
// UNAVAILABLE at once.

#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "common/grpc_status.h"
#include "coordinator/core/executor.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::coordinator {

inline grpc::ServerUnaryReactor* FinishOnExecutor(grpc::CallbackServerContext* context, Executor* executor,
                                                  std::function<absl::Status()> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const bool posted = executor->Post([reactor, work = std::move(work)] { reactor->Finish(ToGrpcStatus(work())); });
  if (!posted) reactor->Finish(ToGrpcStatus(absl::UnavailableError("the coordinator is shutting down")));
  return reactor;
}

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_FINISH_ON_EXECUTOR_H_
