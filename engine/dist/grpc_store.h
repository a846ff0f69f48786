#ifndef RINGMASTER_ENGINE_DIST_GRPC_STORE_H_
#define RINGMASTER_ENGINE_DIST_GRPC_STORE_H_

// GrpcStore: the coordinator's RendezvousService as a dist::Store (the
// key-value store Gloo needs) and a dist::UniqueIdExchange (the NCCL unique
// id RPCs, which the coordinator validates and fences per generation), reached
// through the worker's local socket (the trainer's RINGMASTER_RENDEZVOUS is
// "grpc:unix:/run/ringmaster/agent.sock") or directly (tests, tools):
//
//   GrpcStoreOptions options;
//   options.target = "unix:/run/ringmaster/agent.sock";
//   options.job_id = "j-42";
//   options.generation = 3;
//   options.rank = 1;
//   ASSIGN_OR_RETURN(std::unique_ptr<GrpcStore> store, GrpcStore::Connect(options));
//
// Every request carries the scope (job id, generation, rank); the service
// keeps one key space per (job, generation), so keys need no job prefix.
//
//   Set  -> KvSet                        gRPC deadline: call_timeout
//   Get  -> KvWait({key}, timeout)       gRPC deadline: timeout + deadline_slack
//           (timeout <= 0: KvGet, no waiting)
//   Wait -> KvWait(keys, timeout)        gRPC deadline: timeout + deadline_slack
//   Add  -> KvAdd(key, delta)            gRPC deadline: call_timeout
//           (atomic in the service; the value is decimal text, so Get reads
//           it; a non-integer value is the service's FAILED_PRECONDITION;
//           not retried: Add is not idempotent)
//   Publish -> PublishNcclUniqueId(communicator, id)   gRPC deadline: call_timeout
//   Fetch   -> GetNcclUniqueId(communicator, timeout)  gRPC deadline: timeout + deadline_slack
//   An infinite timeout sends no timeout (the generation's rendezvous
//   deadline bounds the wait) and sets no gRPC deadline.
//
// A coordinator at one of its limits answers RESOURCE_EXHAUSTED before doing
// anything: every call then tries again after a backoff (common/retry.h:
// initial_backoff, doubling up to max_backoff, +/- 50 % jitter), until its
// deadline (at most max_retry_window when it has none). So a burst of ranks beyond the limit
// waits its turn instead of failing.
//
// Errors keep the service's code, so the caller knows what to do:
//   UNAVAILABLE        the socket/coordinator cannot be reached (retry the call)
//   DEADLINE_EXCEEDED  the keys were not set in time (from the service, or the
//                      gRPC deadline passed): "key 'k' was not set within 5s"
//   FAILED_PRECONDITION the generation is over (fenced): the rank must exit;
//                      the service's message is passed through
//   others             as the service returned them
// Every message starts with "grpc store <target>: ".
//
// Thread-safe: gRPC stubs are; concurrent calls are independent RPCs.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/dist/store.h"
#include "engine/dist/unique_id_exchange.h"
#include "proto/rendezvous_service.grpc.pb.h"

namespace ringmaster::engine::dist {

struct GrpcStoreOptions {
  // gRPC target of the RendezvousService: "unix:/path/agent.sock",
  // "127.0.0.1:50051", "dns:///coordinator:50051".
  std::string target;
  // The scope sent with every request. job_id is required.
  std::string job_id;
  int64_t generation = 0;
  int32_t rank = 0;
  // The generation's rendezvous secret (RINGMASTER_RENDEZVOUS_SECRET, from
  // the worker), sent in every scope; the coordinator refuses calls without
  // it (PERMISSION_DENIED). Empty: none sent.
  std::string secret;
  // gRPC deadline of the calls that do not wait (Set, Add, Get with
  // timeout <= 0).
  absl::Duration call_timeout = absl::Seconds(30);
  // Added to a blocking call's timeout for its gRPC deadline, so that the
  // service's own DEADLINE_EXCEEDED (which names the missing keys) arrives
  // before the client gives up.
  absl::Duration deadline_slack = absl::Seconds(2);
  // Queue calls while the channel connects (up to the call's deadline)
  // instead of failing at once with UNAVAILABLE.
  bool wait_for_ready = false;
  // Backoff after RESOURCE_EXHAUSTED (see above).
  absl::Duration initial_backoff = absl::Milliseconds(20);
  absl::Duration max_backoff = absl::Seconds(2);
  absl::Duration max_retry_window = absl::Minutes(5);
};

class GrpcStore : public Store, public UniqueIdExchange {
 public:
  // Opens an insecure channel to options.target (it connects lazily: an
  // unreachable service shows up as UNAVAILABLE on the first call).
  // INVALID_ARGUMENT for an empty target or job id, or a negative generation.
  static absl::StatusOr<std::unique_ptr<GrpcStore>> Connect(const GrpcStoreOptions& options);

  // Over an existing stub (tests; a channel shared with other clients).
  GrpcStore(std::unique_ptr<v1::RendezvousService::StubInterface> stub, GrpcStoreOptions options);

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;

  absl::Status Publish(const std::string& communicator, const std::string& id) override;
  absl::StatusOr<std::string> Fetch(const std::string& communicator, absl::Duration timeout) override;

  const GrpcStoreOptions& options() const { return options_; }

 private:
  // KvWait for `keys`; their values in order.
  absl::StatusOr<std::vector<std::string>> WaitFor(const std::vector<std::string>& keys,
                                                   absl::Duration timeout);
  void FillScope(v1::RendezvousScope* scope) const;
  // A blocking call's gRPC deadline: its timeout plus deadline_slack.
  absl::Time WaitDeadline(absl::Duration timeout) const;
  // The wait a blocking request asks the service for: `timeout`, or on a
  // retry what is left before `deadline` less the slack (none sent for an
  // infinite timeout).
  void SetWaitTimeout(absl::Duration timeout, absl::Time deadline, bool retry, google::protobuf::Duration* out) const;
  // One attempt of `call` at a time, each with a fresh context whose deadline
  // is `deadline`, again after a backoff while the coordinator answers
  // RESOURCE_EXHAUSTED and the deadline allows.
  grpc::Status WithBackoff(absl::Time deadline, const std::function<grpc::Status(grpc::ClientContext*)>& call) const;
  std::string Where() const;

  std::unique_ptr<v1::RendezvousService::StubInterface> stub_;
  const GrpcStoreOptions options_;
};

}  // namespace ringmaster::engine::dist

#endif  // RINGMASTER_ENGINE_DIST_GRPC_STORE_H_
