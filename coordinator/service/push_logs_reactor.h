#ifndef RINGMASTER_COORDINATOR_PUSH_LOGS_REACTOR_H_
#define RINGMASTER_COORDINATOR_PUSH_LOGS_REACTOR_H_

// PushLogsReactor: one NodeService.PushLogs stream (a worker's ranks' log
// lines). Each chunk is appended to the LogStore on the executor (file I/O),
// then the next one is read: in order, and a worker faster than the disk is
// held back by flow control. Invalid lines and duplicates (a chunk sent again
// after a broken stream) are dropped and counted; an I/O error ends the
// stream with UNAVAILABLE (the worker sends the chunk again on a new one).
// The worker ends the stream (answer OK), or the coordinator does at
// shutdown (Close: UNAVAILABLE). Before a chunk is appended, every line's
// (job, generation, rank) must pass `authorize` (the rank was placed on the
// pushing node; answers are cached per stream): a line of a job nobody knows
// (NOT_FOUND) is dropped and counted as invalid, so that no line waits for a
// job id yet to come; any other refusal ends the stream with its status
// (PERMISSION_DENIED) and nothing of its chunk is stored.
//
// Threading: gRPC reactions, the executor and Close (any thread) call in;
// state under mu_; gRPC operations start with no lock held, and Finish never
// runs while an append is in progress or a read is being started. Deletes
// itself when gRPC is done and no task of it is pending.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>

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
  // May the stream push lines of this rank of this generation of the job?
  // Runs on the executor (it may wait for the job's lock or read the store).
  using Authorize = std::function<absl::Status(const std::string& job_id, int64_t generation, int32_t rank)>;

  // `on_done` runs once gRPC is done with the stream (before deletion).
  // `authorize` null: every line is refused (UNAUTHENTICATED).
  PushLogsReactor(LogStore* logs, Executor* executor, LogLinesCounter counter, std::string peer, Authorize authorize,
                  std::function<void(PushLogsReactor*)> on_done);

  // Ends the stream with `status` soon. Records and posts: callable with
  // any lock held.
  void Close(const absl::Status& status);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  void Append();
  // Checks every line of chunk_ with authorize_ (on the executor): the lines
  // to store (chunk_ itself when all pass, else *kept) and how many were
  // dropped, or why the stream ends.
  absl::Status AuthorizeChunk(v1::LogChunk* kept, bool* all, int64_t* dropped);
  // Finishes if asked to and nothing is in progress; no lock held.
  void MaybeFinish();
  bool Post(std::function<void()> task);
  void Unref();

  LogStore* const logs_;
  Executor* const executor_;
  const LogLinesCounter counter_;
  const std::string peer_;  // "node n-3" or the peer address, for logs
  const Authorize authorize_;
  // (job, generation, rank) authorize_ allowed: a rank's placement never
  // changes. Used by the append in progress only.
  std::set<std::tuple<std::string, int64_t, int32_t>> allowed_;
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
