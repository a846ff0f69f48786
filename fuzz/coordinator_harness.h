#ifndef RINGMASTER_FUZZ_COORDINATOR_HARNESS_H_
#define RINGMASTER_FUZZ_COORDINATOR_HARNESS_H_

// CoordinatorHarness: the whole coordinator (CoordinatorServer, the
// composition root main() runs) inside a fuzz target's process, on a
// FakeClock, with no ticker, over a state directory in /dev/shm (else /tmp),
// reached through its real gRPC server on 127.0.0.1 (the services are
// callback-API adapters bound to a ServerBuilder inside CoordinatorServer,
// so requests go through gRPC's decoding, the adapters and the core).
//
// It keeps a world the fuzzed requests can reach into: a registered node
// "fuzz-node" (2 CPU slots) and a job of 1 node x 2 CPU ranks that has been
// placed (STARTING or later). Every call on channel() carries that node's
// credential, as its worker's calls would. Fixups let a request name them (job id,
// generation, node id, session id) instead of its fuzzed values, so that
// inputs get past "no such job" to the real handling. Every
// kInputsPerServer inputs it starts over on a fresh directory (bounded
// memory and database size on long runs).
//
// Test-only. Not thread-safe: one input at a time.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/inflate.h"
#include "coordinator/service/coordinator_server.h"
#include "google/protobuf/message.h"
#include "grpcpp/grpcpp.h"
#include "proto/job_spec.pb.h"

namespace ringmaster::fuzz {

inline constexpr int kInputsPerServer = 5000;

// Fixup bits (FuzzCall::fixups).
inline constexpr uint8_t kFixJobId = 1 << 0;       // job_id := the live job
inline constexpr uint8_t kFixGeneration = 1 << 1;  // generation (and secret) := its current one
inline constexpr uint8_t kFixNode = 1 << 2;        // node_id, session_id := the live node's
inline constexpr uint8_t kFixValid = 1 << 3;       // a valid base message merged under the fuzzed one
inline constexpr uint8_t kAdvanceClock = 1 << 7;   // after the call: clock += (fixups & 0x70) s, Tick

class CoordinatorHarness {
 public:
  // The process's harness, started on first use. Lives until exit (gRPC's
  // threads must not outlive it): a leaked singleton, reachable, not a leak.
  static CoordinatorHarness& Get();

  // Before each input: a node with a live session and a placed,
  // non-terminal job (registering / submitting / ticking as needed).
  void BeginInput();
  // After each call with kAdvanceClock: advance the clock and Tick.
  void MaybeAdvance(uint8_t fixups);
  // After each input: the coordinator still answers GetJob of the live job
  // (the world the next input needs is usable); aborts otherwise.
  void CheckUsable();

  // The value a request carries after its fixups.
  std::string JobId(uint8_t fixups, const std::string& fuzzed) const;
  int64_t Generation(uint8_t fixups, int64_t fuzzed) const;
  std::string NodeId(uint8_t fixups, const std::string& fuzzed) const;
  int64_t SessionId(uint8_t fixups, int64_t fuzzed) const;
  // With kFixGeneration: the live generation's rendezvous secret.
  std::string RendezvousSecret(uint8_t fixups, const std::string& fuzzed);

  const std::string& job_id() const { return job_id_; }
  int64_t generation() const { return generation_; }
  const std::string& node_id() const { return node_id_; }
  int64_t session_id() const { return session_id_; }
  const std::string& checkpoint_root() const { return checkpoint_root_; }

  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  coordinator::CoordinatorServer& server() { return *server_; }
  FakeClock& clock() { return clock_; }

  // A valid spec: MLP, synthetic data, 10 steps, 1 node x 2 CPU ranks.
  static v1::JobSpec ValidSpec();

 private:
  CoordinatorHarness() = default;
  void StartServer();
  void RegisterNode();
  void SubmitJob();

  FakeClock clock_;
  std::string state_dir_;
  std::string checkpoint_root_;
  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  int inputs_ = 0;
  std::string node_id_;
  int64_t session_id_ = 0;
  // The node's credential, sent with every call on channel_ (read on gRPC's
  // threads as calls start, some forwarded by an AgentServer).
  std::mutex credential_mu_;
  std::string credential_;
  std::string job_id_;
  int64_t generation_ = 0;
};

// A ClientContext with a deadline `timeout` (real time) from now.
std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::Seconds(10));

// The property every RPC target checks: a call ends with OK or with a
// status a client can act on (INVALID_ARGUMENT, NOT_FOUND,
// FAILED_PRECONDITION, ...), never UNKNOWN (an exception escaped a handler),
// INTERNAL (a bug or a store error), UNIMPLEMENTED or DATA_LOSS. Aborts
// otherwise, naming `rpc`. A `request` whose wire form the server cannot
// parse (a string field with invalid UTF-8) is refused by gRPC before any
// handler runs, with a code of gRPC's choosing: any code is accepted then.
void CheckStatus(const grpc::Status& status, const char* rpc, const google::protobuf::Message& request);

// Whether the server can decode `request` at all (false: a string field
// holds invalid UTF-8, and gRPC refuses the call before any handler runs).
bool ServerCanDecode(const google::protobuf::Message& request);

// Calls a unary RPC with a deadline (real time) and checks its status.
template <typename Stub, typename Request, typename Response>
void Unary(Stub* stub, grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&, Response*), const char* name,
           const Request& request, absl::Duration deadline = absl::Seconds(10)) {
  Response response;
  CheckStatus((stub->*rpc)(Context(deadline).get(), request, &response), name, request);
}

// The request a call carries: its payload decoded as M (what decodes before
// a parse error is kept), over `valid` when the call has kFixValid, then
// inflated as the call says (inflate.h). Fixups are applied after.
template <typename M>
M Decode(const FuzzCall& call, const M& valid = M()) {
  M message;
  if ((call.fixups & kFixValid) != 0) message = valid;
  (void)message.MergeFromString(call.payload);
  (void)Inflate(&message, call.inflation, call.inflate_budget);
  return message;
}

}  // namespace ringmaster::fuzz

#endif  // RINGMASTER_FUZZ_COORDINATOR_HARNESS_H_
