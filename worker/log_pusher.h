#ifndef RINGMASTER_WORKER_LOG_PUSHER_H_
#define RINGMASTER_WORKER_LOG_PUSHER_H_

// LogPusher: the gRPC adapter that sends the LogShipper's chunks to the
// coordinator over one long-lived NodeService.PushLogs stream (metadata
// "ringmaster-node-id" names the node, for diagnostics; the channel's node
// credential is what the coordinator checks: it stores only lines of ranks
// placed on this node). When the stream breaks it is opened
// again after `retry`'s delay; the chunk that failed is sent again on the new
// stream, later ones wait in the shipper's bounded buffer.
//
// A coordinator under its disk reserve ends the stream with
// RESOURCE_EXHAUSTED (the chunk it was given is dropped and counted there).
// The pusher then waits `refused_retry` before it tries again (a new stream
// accepts a write before the coordinator refuses it, so the backoff alone
// would not grow) and logs it; meanwhile lines wait in the shipper's bounded
// buffer and, beyond it, are dropped and counted
// (ringmaster_worker_log_lines_dropped_total). The ranks never wait: they
// write to files that the shipper reads after the fact.
//
// Thread-safe. One thread of its own between Start and Stop.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/node_service.grpc.pb.h"
#include "common/clock.h"
#include "common/retry.h"
#include "worker/log_shipper.h"

namespace ringmaster::worker {

class LogPusher {
 public:
  // `shipper` and `clock` must outlive the pusher. `node_id` is read when a
  // stream opens. `retry` and `refused_retry` are waited on `clock`.
  LogPusher(std::shared_ptr<grpc::Channel> channel, LogShipper* shipper, std::function<std::string()> node_id,
            RetryPolicy retry = {}, absl::Duration refused_retry = absl::Seconds(10), Clock* clock = Clock::Real());
  ~LogPusher();
  LogPusher(const LogPusher&) = delete;
  LogPusher& operator=(const LogPusher&) = delete;

  void Start();
  // Sends what the shipper still holds (Close() the shipper first) for at
  // most `timeout`, ends the stream and joins the thread. Idempotent.
  void Stop(absl::Duration timeout = absl::Seconds(2));

  int64_t chunks_sent() const;
  // Streams the coordinator ended with RESOURCE_EXHAUSTED.
  int64_t refusals() const;

 private:
  void Loop();
  bool SleepFor(absl::Duration d);  // false when stopping

  const std::unique_ptr<v1::NodeService::Stub> stub_;
  LogShipper* const shipper_;
  const std::function<std::string()> node_id_;
  const RetryPolicy retry_;
  const absl::Duration refused_retry_;
  Clock* const clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool draining_ = false;  // Stop called: finish when the shipper is empty
  bool abort_ = false;     // Stop's timeout passed: give up now
  bool done_ = false;
  grpc::ClientContext* call_ = nullptr;
  int64_t chunks_sent_ = 0;
  int64_t refusals_ = 0;
  std::thread thread_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_LOG_PUSHER_H_
