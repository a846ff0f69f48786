#ifndef RINGMASTER_COORDINATOR_NODE_REGISTRY_H_
#define RINGMASTER_COORDINATOR_NODE_REGISTRY_H_

// NodeRegistry: the nodes the coordinator knows, their leases, and which
// slots (GPUs, CPU slots) the ranks of each job generation hold on them.
//
// Owns: per node its NodeInfo (GPUs, CPU slots, labels, address, state), its
// lease and session, and its rank slots. Free capacity = what no rank slot
// holds. Node registrations and state changes (READY, CORDONED, LOST) are
// written to the Store; leases and slots are in memory (after a coordinator
// restart every node gets a fresh lease; the JobController re-reserves the
// slots of the generations it recovers).
//
// Leases: a registration or heartbeat renews the lease until now +
// heartbeat_interval x missed_heartbeats (the coordinator's clock). A node
// whose lease has run out is LOST at the next ExpireLeases(), which returns
// it so that the JobController can restart what ran there; its slots stay
// until the controller releases them. A LOST node comes back by registering
// again (a new session).
//
// Health: a worker whose health checks fail says so on its heartbeats; the
// node is then NOT_READY (no placements; its jobs move as in a drain) until
// a heartbeat reports it healthy. Kept in memory only.
//
// Node identity: each node has a credential, a random 256-bit secret the
// registry issues at the node's first registration (NodeRegistration::
// credential) and keeps only as its SHA-256, with the node in the store (so
// that it outlives coordinator restarts). Over mutual TLS the node is also
// bound to the identity of the client certificate it first registered with.
// A registration of a node that has a credential must present it (else
// PERMISSION_DENIED: nobody else can take the node over); every other call
// for a node is mapped to its node by AuthenticateNode.
//
// Thread-safe (one internal mutex; never calls out while holding it).

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core/capacity.h"
#include "coordinator/core/node_store_writer.h"
#include "coordinator/store/store.h"
#include "proto/node.pb.h"

namespace ringmaster::coordinator {

// NodeInfo.cordoned_by of a node its own worker drained (SIGUSR1).
inline constexpr char kCordonedByWorker[] = "worker";

struct NodeRegistryOptions {
  // Workers heartbeat at least this often.
  absl::Duration heartbeat_interval = absl::Seconds(5);
  // A node is LOST once this many intervals pass without a heartbeat.
  int missed_heartbeats = 3;
  // After a coordinator restart, how long a recovered node has to register
  // again before it is LOST (at least one lease). It covers the workers'
  // reconnection backoff (30 s at most by default, plus gRPC's own), so that
  // a restart alone never loses a node and restarts the jobs running there.
  absl::Duration recovery_grace = absl::Seconds(60);
};

struct NodeRegistration {
  std::string node_id;
  int64_t session_id = 0;  // the Session must present it; heartbeats too
  absl::Duration lease_duration;
  absl::Duration heartbeat_interval;
  absl::Time lease_expiry;
  // The node's credential (64 hex digits), when this registration issued
  // it: the node's first, or the first of a node stored without one. Empty:
  // the node keeps the one it has. Never logged.
  std::string credential;
};

// What a call presents to say which node it comes from.
struct NodeProof {
  std::string credential;       // the node credential header; empty if absent
  std::string client_identity;  // the verified client certificate's identity; empty without TLS
};

// One rank's hold on a node.
struct RankSlot {
  std::string job_id;
  int64_t generation = 0;
  int32_t global_rank = 0;
  std::string gpu_uuid;   // CUDA: the GPU it holds; CPU: empty
  int32_t cpu_slots = 0;  // CPU: slots it holds; CUDA: 0
  int32_t master_port = 0;  // rank 0 of a program job: its MASTER_PORT on the node; else 0
};

class NodeRegistry {
 public:
  NodeRegistry(const Clock* clock, Store* store, NodeRegistryOptions options = {});

  // Loads the nodes of the store. READY and CORDONED nodes get a lease from
  // now of max(lease, recovery_grace) and no valid session (their workers
  // register again); LOST nodes stay LOST. Call once, before anything else.
  absl::Status Recover();

  // Registers a node (first time: empty node_id) or registers it again (a
  // new session; a LOST node comes back READY, or CORDONED while cordoned).
  // Takes hostname, address, gpus, cpu_slots, labels, worker_version from
  // `node`. INVALID_ARGUMENT for an empty hostname, a GPU without uuid or a
  // uuid listed twice, negative cpu_slots. `hold`: slots of rank processes
  // the worker still runs, reserved on the node in the same step, before
  // any placement can see its capacity (a slot that conflicts is skipped and
  // logged). `worker_drains`: the worker drains its node (cordoned by
  // "worker" unless an operator cordoned it, and draining); false clears a
  // cordon the worker set (an operator's stays). The store write happens
  // outside the registry's lock.
  //
  // `proof` (what the worker's call presented; null: a trusted in-process
  // caller, which names nodes freely) decides which node this is:
  //  * a credential some node has: that node (PERMISSION_DENIED when
  //    node.node_id names another one);
  //  * else node.node_id of a node that has a credential: PERMISSION_DENIED
  //    (the worker lost it, or someone else names the node);
  //  * else node.node_id of a node stored without one (a database of an
  //    earlier version): that node, and it gets a credential now;
  //  * else the node with node's hostname and address, if it has no
  //    credential; otherwise a new node.
  // A node bound to a client certificate accepts only that certificate's
  // identity (PERMISSION_DENIED); one not bound yet is bound to the proof's.
  absl::StatusOr<NodeRegistration> Register(const v1::NodeInfo& node, const std::vector<RankSlot>& hold = {},
                                            bool worker_drains = false, const NodeProof* proof = nullptr);

  // The node a call comes from: the node whose credential the proof
  // presents. UNAUTHENTICATED without a credential or with one no node has;
  // PERMISSION_DENIED when the node is bound to another client certificate.
  absl::StatusOr<std::string> AuthenticateNode(const NodeProof& proof) const;

  // Renews the lease; returns the new expiry. NOT_FOUND for an unknown node;
  // FAILED_PRECONDITION when session_id is not the node's current session
  // or the node is LOST (the worker must register again). `health_failure`
  // (Heartbeat.health_failure): non-empty makes the node NOT_READY with it as
  // not_ready_reason and starts moving its jobs off (draining, in memory: the
  // worker reports it again after a coordinator restart); empty makes it
  // READY (or CORDONED) again and ends a drain the failure began.
  absl::StatusOr<absl::Time> Heartbeat(const std::string& node_id, int64_t session_id,
                                       const std::string& health_failure = "");
  // OK when session_id is the node's current session and it is not LOST.
  absl::Status CheckSession(const std::string& node_id, int64_t session_id) const;
  // CheckSession of each (node_id, session_id), in order, under one lock
  // (the ticker checks every open session).
  std::vector<absl::Status> CheckSessions(const std::vector<std::pair<std::string, int64_t>>& sessions) const;

  // Marks every node whose lease has run out LOST and returns their ids
  // (each node once per loss). The loss is stored best effort, after the
  // registry's lock is released.
  std::vector<std::string> ExpireLeases();

  // Cordons: what NodeInfo.cordoned_by says. A cordoned node takes no new
  // placements; what runs there continues. Kept in the store.
  //
  // The id of the node `name` names: an id, else a hostname. NOT_FOUND;
  // INVALID_ARGUMENT when several nodes have that hostname.
  absl::StatusOr<std::string> Resolve(const std::string& name) const;
  // Cordons the node (`by`: who, `reason`: why) or, with `by` empty,
  // uncordons it, which also ends a drain. A LOST node may be cordoned: it
  // comes back cordoned. Returns the node after it; NOT_FOUND.
  absl::StatusOr<v1::NodeInfo> SetCordon(const std::string& node_id, const std::string& by, const std::string& reason);
  // Marks the node draining and cordons it (by, reason), unless an operator
  // cordoned it already. NOT_FOUND.
  absl::StatusOr<v1::NodeInfo> StartDrain(const std::string& node_id, const std::string& by, const std::string& reason);
  // The drain is over (nothing runs there any more); the node stays cordoned.
  absl::Status EndDrain(const std::string& node_id);
  // Nodes with a drain in progress.
  std::vector<std::string> DrainingNodes() const;

  // The node with its lease, allocations and free counts. NOT_FOUND.
  absl::StatusOr<v1::NodeInfo> GetNode(const std::string& node_id) const;
  // Every node, ordered by hostname then node id.
  std::vector<v1::NodeInfo> ListNodes() const;
  // One page of the nodes in `states` (empty: all), in that order: at most
  // `page_size` nodes after (after_hostname, after_node_id) (both empty: from
  // the first), stopping before `max_bytes` of them (a page holds at least
  // one). Only the page's nodes are copied.
  struct NodePage {
    std::vector<v1::NodeInfo> nodes;
    bool more = false;  // nodes follow the page
    int32_t total = 0;  // nodes in `states`, over all pages
  };
  NodePage ListNodesPage(const std::vector<v1::NodeState>& states, const std::string& after_hostname,
                         const std::string& after_node_id, int page_size, size_t max_bytes) const;
  // READY nodes with their free capacity: the scheduler's input.
  std::vector<NodeCapacity> SchedulableCapacity() const;

  // Reserves slots for ranks on a node, all or none. FAILED_PRECONDITION if
  // a GPU is not the node's or already held, or CPU slots would exceed the
  // node's; NOT_FOUND for an unknown node. Reserving a slot the same rank of
  // the same generation already holds is a no-op.
  absl::Status Reserve(const std::string& node_id, const std::vector<RankSlot>& slots);
  // Releases one rank's slot (no-op if not held).
  void Release(const std::string& node_id, const std::string& job_id, int64_t generation, int32_t global_rank);
  // Releases every slot of one generation of a job, on every node.
  void ReleaseGeneration(const std::string& job_id, int64_t generation);
  // Releases every slot on a node; returns what was released.
  // ReleaseAllOn, only while the node is LOST (atomically: a registration
  // that brings it back either comes after, and holds its slots again, or
  // before, and then nothing is released). False when it is not LOST.
  bool ReleaseAllIfLost(const std::string& node_id);
  std::vector<RankSlot> ReleaseAllOn(const std::string& node_id);
  // The slots held on a node (empty for an unknown node).
  std::vector<RankSlot> SlotsOn(const std::string& node_id) const;
  // Every slot held, grouped by job and generation (in that order).
  std::vector<HeldGeneration> HeldGenerations() const;

  absl::Duration lease_duration() const { return options_.heartbeat_interval * options_.missed_heartbeats; }

 private:
  struct Node {
    v1::NodeInfo info;  // as registered (credential_sha256 included); state, lease_expiry kept current
    int64_t session_id = 0;
    absl::Time lease_expiry;
    std::vector<RankSlot> slots;
  };

  v1::NodeInfo SnapshotLocked(const Node& node) const;
  absl::Status CheckSessionLocked(const std::string& node_id, int64_t session_id) const;
  void SetHealthLocked(Node& node, const std::string& health_failure);
  absl::Status ReserveLocked(Node& node, const std::string& node_id, const std::vector<RankSlot>& slots);
  // Which known node a registration is for ("": a new one), by Register's
  // rules; `proof` null: by id, else hostname and address.
  absl::StatusOr<std::string> ResolveRegistrationLocked(const v1::NodeInfo& node, const NodeProof* proof) const;
  // Applies `change` (cordon fields only) to a copy of the node's info,
  // stores it, then applies it in memory with the state that follows.
  absl::StatusOr<v1::NodeInfo> Update(const std::string& node_id, const std::function<void(v1::NodeInfo&)>& change);

  const Clock* clock_;
  Store* store_;
  NodeStoreWriter registrations_;  // Register's writes, committed in groups
  const NodeRegistryOptions options_;

  mutable std::mutex mu_;
  std::map<std::string, Node> nodes_;  // by node_id
  std::map<std::string, std::string> by_credential_;  // credential SHA-256 (hex) -> node_id
  // (hostname, node_id) of every node: a registration without an id, Resolve
  // and ListNodes find a hostname without reading every node.
  std::set<std::pair<std::string, std::string>> by_host_;
  int64_t next_session_;               // unique across coordinator restarts (seeded from the clock)
};

}  // namespace ringmaster::coordinator

#endif  // RINGMASTER_COORDINATOR_NODE_REGISTRY_H_
