#ifndef RINGMASTER_COORDINATOR_PUSH_LOGS_REACTOR_H_
#define RINGMASTER_COORDINATOR_PUSH_LOGS_REACTOR_H_

// PushLogsReactor: one NodeService.PushLogs stream (a worker's ranks' log
// lines). Each chunk is appended to the LogStore on the executor (file I/O),
// then the next one is read: in order, and a worker faster than the disk is
// held back by flow control. Invalid lines and duplicates (a chunk sent again
// after a broken stream) are dropped and counted; an I/O error ends the
// stream with UNAVAILABLE (the worker sends the chunk again on a new one).
// The worker ends the stream (answer OK), or the coordinator does at
// shutdown (Close: UNAVAILABLE).
//
// Threading: gRPC reactions, the executor and Close (any thread) call in;
// state under mu_; gRPC operations start with no lock held, and Finish never
// runs while an append is in progress or a read is being started. Deletes
// itself when gRPC is done and no task of it is pending.

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "coordinator/core/executor.h"
#include "coordinator/store/log_store.h"
#include "grpcpp/grpcpp.h"
#include "proto/node_service.grpc.pb.h"

namespace ringmaster::coordinator {

// Called after each chunk with what became of its lines (metrics).
using LogLinesCounter = std::function<void(const AppendResult&)>;

class PushLogsReactor final : public grpc::ServerReadReactor<v1::LogChunk> {
 public:
  // `on_done` runs once gRPC is done with the stream (before deletion).
  PushLogsReactor(LogStore* logs, Executor* executor, LogLinesCounter counter, std::string peer,
                  std::function<void(PushLogsReactor*)> on_done);

  // Ends the stream with `status` soon. Records and posts: callable with
  // any lock held.
  void Close(const absl::Status& status);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  void Append();
  // Finishes if asked to and nothing is in progress; no lock held.
  void MaybeFinish();
  bool Post(std::function<void()> task);
  void Unref();

  LogStore* const logs_;
  Executor* const executor_;
  const LogLinesCounter counter_;
  const std::string peer_;  // "node n-3" or the peer address, for logs
  const std::function<void(PushLogsReactor*)> on_done_;
  std::atomic<int> refs_{1};
  v1::LogChunk chunk_;  // owned by the read in flight, then by the append

  std::mutex mu_;
  bool busy_ = false;  // an append runs, or the next read is being started
  std::optional<grpc::Status> finish_with_;
  bool finished_ = false;
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_PUSH_LOGS_REACTOR_H_
