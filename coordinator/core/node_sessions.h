#ifndef RINGMASTER_COORDINATOR_NODE_SESSIONS_H_
#define RINGMASTER_COORDINATOR_NODE_SESSIONS_H_

// NodeSessions: which Session stream each node has open, and the start and
// stop orders on their way to it. A JobListener of the JobController: start
// and stop orders are queued to the node's session as they are announced
// (under the job's lock, in order).
//
//   - Attach (the session's `open`): checks the session id, then, in one
//     step with NodeReconciler::AssignmentsForNode, makes the sink the node's
//     session (closing the one it supersedes), hands it the stop orders kept
//     for the node and then a StartRanks per current assignment. No order can
//     slip between the two or overtake them.
//   - A start order for a node without a session is dropped: the next
//     session's Attach sends the node's current assignments. A stop order is
//     kept (at most max_pending_stops per node, oldest dropped) for the next
//     session.
//   - CloseInvalid (the ticker): sessions whose node is no longer theirs
//     (LOST after its lease ran out, or registered again) are closed with
//     the registry's error.
//
// Thread-safe. Lock order: JobController -> NodeSessions -> {NodeRegistry,
// a sink's own lock}. SessionSink calls run with this class's lock held:
// they must record and return (never call gRPC there).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "coordinator/core/job_controller.h"
#include "coordinator/core/node_registry.h"
#include "proto/node_service.pb.h"

namespace ringmaster::coordinator {

class SessionSink {
 public:
  virtual ~SessionSink() = default;
  // A message for the worker.
  virtual void Send(v1::CoordinatorMessage message) = 0;
  // End the session with `status`. Called at most once.
  virtual void Close(const absl::Status& status) = 0;
};

struct NodeSessionsOptions {
  size_t max_pending_stops = 1024;
};

class NodeSessions : public JobListener {
 public:
  NodeSessions(const JobController* controller, const NodeRegistry* nodes, NodeSessionsOptions options = {});

  // See the class comment. NOT_FOUND / FAILED_PRECONDITION from the
  // registry for a session that is not the node's current one, UNAVAILABLE
  // after CloseAll. The sink stays attached until Detach (or it is closed).
  absl::Status Attach(const std::string& node_id, int64_t session_id, SessionSink* sink);
  // Detaches `sink` if it is still the node's session. Returns once no call
  // into the sink runs (it may then be destroyed).
  void Detach(const std::string& node_id, SessionSink* sink);
  // Closes (and detaches) every session the registry no longer accepts.
  void CloseInvalid();
  // Closes every session; later Attach calls fail. For shutdown.
  void CloseAll(const absl::Status& status);

  size_t open_sessions() const;

  // JobListener
  void OnJobChanged(const v1::Job&, const std::vector<v1::JobEvent>&) override {}
  void OnStartRanks(const StartOrder& order) override;
  void OnStopRanks(const StopOrder& order) override;
  // Sent to the node's session, if it has one (a drain sends it again).
  void OnCheckpointNow(const CheckpointOrder& order) override;

 private:
  struct Session {
    int64_t session_id = 0;
    SessionSink* sink = nullptr;
  };

  const JobController* const controller_;
  const NodeRegistry* const nodes_;
  const NodeSessionsOptions options_;

  mutable std::mutex mu_;
  bool closed_ = false;
  std::map<std::string, Session> sessions_;                         // by node id
  std::map<std::string, std::deque<v1::StopRanks>> pending_stops_;  // nodes without a session
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_NODE_SESSIONS_H_
