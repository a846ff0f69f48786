#ifndef RINGMASTER_BENCH_SIM_NODE_H_
#define RINGMASTER_BENCH_SIM_NODE_H_

// SimNode: one simulated worker speaking the real NodeService and
// RendezvousService API to a coordinator, without threads of its own (the
// gRPC callback API; the heartbeat clock is the caller's):
//
//   Register() -> RegisterNodeRequest{hostname, address, G GPUs}; on OK the
//   Session stream opens with `open` and a heartbeat, as ringmaster-worker
//   does. SendHeartbeat() queues a heartbeat (with the ranks "running") and
//   times it until its LeaseGrant: the stream is ordered and every heartbeat
//   is answered by exactly one grant, so grants match heartbeats first in,
//   first out.
//   StartRanks (its placement kept as bytes: sim_messages.proto; node 0
//   parses it, timed, as a worker would) -> the order's arrival is recorded, a StartRanksResult
//   (all started) goes back, and each rank does what a trainer does for its
//   NCCL communicator "world", presenting the order's generation and
//   rendezvous secret: rank 0 publishes a 128-byte unique id, every other
//   rank calls GetNcclUniqueId and checks the bytes.
//   ReportExits() -> ReportRankExit(exit 0) for every rank of the node.
//   StopRanks are counted (and their ranks reported as stopped).
//
// Everything measured goes to the shared SimRecorder. Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "bench/sim_messages.pb.h"
#include "bench/sim_recorder.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/client_callback.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "proto/node_service.grpc.pb.h"
#include "proto/rendezvous_service.grpc.pb.h"

namespace ringmaster::bench {

// The stubs a node uses (one set per channel, shared by its nodes).
struct SimStubs {
  explicit SimStubs(std::shared_ptr<grpc::Channel> channel);

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::NodeService::Stub> nodes;
  std::unique_ptr<v1::RendezvousService::Stub> rendezvous;
  // NodeService.Session, read as SimCoordinatorMessage (sim_messages.proto).
  grpc::internal::RpcMethod session;
};

class SimNode : public grpc::ClientBidiReactor<v1::WorkerMessage, SimCoordinatorMessage> {
 public:
  // `stubs` and `recorder` must outlive the node. Every call of the node
  // (Register, the unary calls) has the deadline `rpc_timeout` from its start.
  SimNode(int index, int gpus, SimStubs* stubs, SimRecorder* recorder, std::chrono::milliseconds rpc_timeout);
  ~SimNode() override;

  void Register();
  // No-op until the session is open, and after Close.
  void SendHeartbeat();
  void ReportExits();
  // Ends the stream (WritesDone once the writes queued are out).
  void Close();
  // How a node's stream and calls ended.
  enum class Ending {
    kByThemselves,
    kCancelled,  // cancelled at the deadline, then ended
    kStuck,      // still not ended kCancelGrace after the cancel: a callback is due, do not destroy the node
  };
  static constexpr auto kCancelGrace = std::chrono::seconds(5);
  // Waits for the stream and the node's calls to end; after `deadline`
  // cancels them all and waits at most kCancelGrace more.
  Ending WaitDone(SteadyTime deadline);

  // Reactor callbacks.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  struct Outgoing {
    v1::WorkerMessage message;
    bool heartbeat = false;
  };

  void OnRegistered(const grpc::Status& status);
  void HandleStart(const SimStartRanks& start);
  void HandleLease();
  // What rank `rank` of the order does for its communicator, with the
  // order's job, generation and rendezvous secret.
  void StartRendezvous(const SimStartRanks& start, int rank);
  // Queues a message; starts the write if none is in flight. Lock held.
  void QueueLocked(v1::WorkerMessage message, bool heartbeat);
  void PumpLocked();
  void BeginCall(grpc::ClientContext* context);  // a unary call of the node starts / ended
  void EndCall(grpc::ClientContext* context);
  v1::WorkerMessage HeartbeatLocked() const;
  std::string Credential();

  const int index_;
  const int gpus_;
  SimStubs* const stubs_;
  SimRecorder* const recorder_;
  const std::string hostname_;
  const std::chrono::milliseconds rpc_timeout_;

  grpc::ClientContext register_context_;
  v1::RegisterNodeRequest register_request_;
  v1::RegisterNodeResponse register_response_;
  grpc::ClientContext session_context_;
  SimCoordinatorMessage incoming_;

  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool registering_ = false;  // Register in flight
  std::set<grpc::ClientContext*> calls_;  // rendezvous and exit calls in flight (cancelled by WaitDone)
  bool open_ = false;      // the session's first write was issued
  bool closing_ = false;   // Close() called
  bool writes_done_ = false;
  bool done_ = false;
  bool got_lease_ = false;
  std::string node_id_;
  std::string credential_;  // the node's, from Register: sent with every call
  std::deque<Outgoing> outbox_;
  Outgoing writing_;
  bool write_in_flight_ = false;
  // Send times of heartbeats not yet granted, with whether they are recorded.
  std::deque<std::pair<SteadyTime, bool>> unanswered_;
  // The job generation the node runs, and its ranks (empty once exited).
  std::string job_id_;
  int64_t generation_ = 0;
  std::vector<int32_t> ranks_;
};

}  // namespace ringmaster::bench

#endif  // RINGMASTER_BENCH_SIM_NODE_H_
