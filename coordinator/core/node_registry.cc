#include "coordinator/core/node_registry.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/proto_time.h"
#include "common/tls.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {
namespace {

// The state of a node whose lease is current.
v1::NodeState LiveState(const v1::NodeInfo& info) {
  if (!info.not_ready_reason().empty()) return v1::NODE_STATE_NOT_READY;
  return info.cordoned_by().empty() ? v1::NODE_STATE_READY : v1::NODE_STATE_CORDONED;
}

absl::Status ValidateNode(const v1::NodeInfo& node) {
  if (node.hostname().empty()) return absl::InvalidArgumentError("node.hostname: must not be empty");
  if (node.cpu_slots() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("node.cpu_slots: must be >= 0, got ", node.cpu_slots()));
  }
  std::set<std::string> uuids;
  for (int i = 0; i < node.gpus_size(); ++i) {
    const std::string& uuid = node.gpus(i).uuid();
    if (uuid.empty()) return absl::InvalidArgumentError(absl::StrCat("node.gpus[", i, "].uuid: must not be empty"));
    if (!uuids.insert(uuid).second) {
      return absl::InvalidArgumentError(absl::StrCat("node.gpus[", i, "].uuid: ", uuid, " is listed twice"));
    }
  }
  return absl::OkStatus();
}

// Bytes of a node credential (256 bits).
constexpr size_t kCredentialBytes = 32;
constexpr char kCredentialHeaderName[] = "x-ringmaster-node-credential";

std::string Described(const std::string& identity) {
  return identity.empty() ? std::string("no client certificate") : absl::StrCat("\"", identity, "\"");
}

}  // namespace

NodeRegistry::NodeRegistry(const Clock* clock, Store* store, NodeRegistryOptions options)
    : clock_(clock),
      store_(store),
      registrations_(store),
      options_(options),
      next_session_(absl::ToUnixMicros(clock->Now())) {}

absl::Status NodeRegistry::Recover() {
  ASSIGN_OR_RETURN(std::vector<v1::NodeInfo> stored, store_->LoadNodes());
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time expiry = clock_->Now() + std::max(lease_duration(), options_.recovery_grace);
  for (v1::NodeInfo& info : stored) {
    Node node;
    node.info = std::move(info);
    // Health is the worker's to report again; until then, what it was cordoned for.
    node.info.clear_not_ready_reason();
    if (node.info.state() == v1::NODE_STATE_NOT_READY) node.info.set_state(LiveState(node.info));
    if (!node.info.credential_sha256().empty()) by_credential_[node.info.credential_sha256()] = node.info.node_id();
    node.lease_expiry = expiry;
    node.session_id = 0;  // no session survives a restart
    by_host_.emplace(node.info.hostname(), node.info.node_id());
    nodes_[node.info.node_id()] = std::move(node);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NodeRegistry::ResolveRegistrationLocked(const v1::NodeInfo& node,
                                                                    const NodeProof* proof) const {
  const std::string& named = node.node_id();
  auto has_credential = [&](const std::string& id) { return !nodes_.at(id).info.credential_sha256().empty(); };
  if (proof != nullptr && !proof->credential.empty()) {
    auto it = by_credential_.find(Sha256Hex(proof->credential));
    if (it != by_credential_.end()) {
      if (!named.empty() && named != it->second) {
        return absl::PermissionDeniedError(absl::StrCat("node.node_id: ", named, " is not the node of the credential ",
                                                        "this call presents (", it->second, ")"));
      }
      return it->second;
    }
    // A credential no node has (this coordinator lost the node): as none.
  }
  if (!named.empty() && nodes_.count(named) > 0) {
    if (proof == nullptr || !has_credential(named)) return named;
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", named, " has a credential and this registration does not present it (", kCredentialHeaderName,
        "): only its own worker may register it. A worker keeps it in <state-dir>/node-credential; one that lost "
        "it registers as a new node once <state-dir>/node-id is removed"));
  }
  // A worker that lost its id: the node with the same hostname and address,
  // unless that node has a credential (its worker would have presented it).
  for (auto it = by_host_.lower_bound({node.hostname(), ""}); it != by_host_.end() && it->first == node.hostname();
       ++it) {
    const std::string& id = it->second;
    if (nodes_.at(id).info.address() == node.address() && (proof == nullptr || !has_credential(id))) return id;
  }
  return std::string();
}

absl::StatusOr<NodeRegistration> NodeRegistry::Register(const v1::NodeInfo& node, const std::vector<RankSlot>& hold,
                                                        bool worker_drains, const NodeProof* proof) {
  RETURN_IF_ERROR(ValidateNode(node));
  v1::NodeInfo info;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(std::string node_id, ResolveRegistrationLocked(node, proof));
    auto it = nodes_.find(node_id);
    const bool known = it != nodes_.end();
    info.set_node_id(known ? node_id : "");
    if (known) {  // an operator's cordon and drain outlive registrations; so do the node's credential and certificate
      info.set_cordoned_by(it->second.info.cordoned_by());
      info.set_cordon_reason(it->second.info.cordon_reason());
      info.set_draining(it->second.info.draining());
      info.set_credential_sha256(it->second.info.credential_sha256());
      info.set_client_identity(it->second.info.client_identity());
      // A sick node stays NOT_READY until its worker's heartbeat says it passes.
      info.set_not_ready_reason(it->second.info.not_ready_reason());
    }
    const std::string presented = proof == nullptr ? "" : proof->client_identity;
    if (proof != nullptr && !info.client_identity().empty() && presented != info.client_identity()) {
      return absl::PermissionDeniedError(absl::StrCat("node ", node_id, " is bound to the client certificate ",
                                                      Described(info.client_identity()), "; this call presents ",
                                                      Described(presented)));
    }
    if (info.client_identity().empty()) info.set_client_identity(presented);
  }
  std::string credential;  // issued now
  if (info.credential_sha256().empty()) {
    ASSIGN_OR_RETURN(credential, RandomHex(kCredentialBytes));
    info.set_credential_sha256(Sha256Hex(credential));
  }
  if (worker_drains && info.cordoned_by().empty()) {
    info.set_cordoned_by(kCordonedByWorker);
    info.set_cordon_reason("the worker drains its node");
  }
  if (worker_drains) info.set_draining(true);
  if (!worker_drains && info.cordoned_by() == kCordonedByWorker) {  // a new worker: the node is capacity again
    info.clear_cordoned_by();
    info.clear_cordon_reason();
    info.set_draining(false);
  }
  info.set_state(LiveState(info));
  info.set_hostname(node.hostname());
  info.set_address(node.address());
  *info.mutable_gpus() = node.gpus();
  info.set_cpu_slots(node.cpu_slots());
  *info.mutable_labels() = node.labels();
  *info.mutable_data_roots() = node.data_roots();
  info.set_worker_version(node.worker_version());
  const absl::Time now = clock_->Now();
  *info.mutable_register_time() = ToProtoTime(now);
  // Durable first (a new node gets its id here), then in memory. Concurrent
  // registrations share a transaction (group commit: one fsync for a burst).
  ASSIGN_OR_RETURN(std::string stored_id, registrations_.Put(info));
  info.set_node_id(stored_id);
  std::unique_lock<std::mutex> lock(mu_);
  Node& updated = nodes_[stored_id];
  if (!credential.empty() && !updated.info.credential_sha256().empty() &&
      updated.info.credential_sha256() != info.credential_sha256()) {
    // Another registration gave the node (stored without one) its credential
    // meanwhile: it stays the node's, in the store too.
    const v1::NodeInfo winner = updated.info;
    lock.unlock();
    if (absl::Status s = store_->PutNode(winner).status(); !s.ok()) {
      spdlog::error("node {}: its credential could not be stored again: {}", stored_id, s.ToString());
    }
    return absl::PermissionDeniedError(
        absl::StrCat("node ", stored_id, " got its credential from another registration meanwhile"));
  }
  if (updated.info.hostname() != info.hostname()) {
    by_host_.erase({updated.info.hostname(), stored_id});
    by_host_.emplace(info.hostname(), stored_id);
  }
  updated.info = std::move(info);
  by_credential_[updated.info.credential_sha256()] = stored_id;
  updated.session_id = ++next_session_;
  // From now, not from before the store write: every wait since (the
  // database's queue, this lock) would come off the node's first lease, and
  // in a burst of registrations a node could be LOST before its first
  // heartbeat.
  updated.lease_expiry = clock_->Now() + lease_duration();
  for (const RankSlot& slot : hold) {
    if (absl::Status s = ReserveLocked(updated, stored_id, {slot}); !s.ok()) {
      spdlog::warn("node {}: slot of rank {} of job {} (generation {}) not held: {}", stored_id, slot.global_rank,
                   slot.job_id, slot.generation, s.ToString());
    }
  }
  if (!credential.empty()) spdlog::info("node {} ({}): credential issued", stored_id, updated.info.hostname());
  return NodeRegistration{stored_id,       updated.session_id, lease_duration(), options_.heartbeat_interval,
                          updated.lease_expiry, std::move(credential)};
}

absl::StatusOr<std::string> NodeRegistry::AuthenticateNode(const NodeProof& proof) const {
  if (proof.credential.empty()) {
    return absl::UnauthenticatedError(absl::StrCat("no node credential (", kCredentialHeaderName,
                                                   "): a worker gets its node's when it registers"));
  }
  const std::string hash = Sha256Hex(proof.credential);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_credential_.find(hash);
  if (it == by_credential_.end()) {
    return absl::UnauthenticatedError("the node credential is not one of a registered node's; register again");
  }
  const std::string& bound = nodes_.at(it->second).info.client_identity();
  if (!bound.empty() && bound != proof.client_identity) {
    return absl::PermissionDeniedError(absl::StrCat("node ", it->second, " is bound to the client certificate ",
                                                    Described(bound), "; this call presents ",
                                                    Described(proof.client_identity)));
  }
  return it->second;
}

absl::Status NodeRegistry::CheckSession(const std::string& node_id, int64_t session_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CheckSessionLocked(node_id, session_id);
}

std::vector<absl::Status> NodeRegistry::CheckSessions(
    const std::vector<std::pair<std::string, int64_t>>& sessions) const {
  std::vector<absl::Status> out;
  out.reserve(sessions.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [node_id, session_id] : sessions) out.push_back(CheckSessionLocked(node_id, session_id));
  return out;
}

absl::Status NodeRegistry::CheckSessionLocked(const std::string& node_id, int64_t session_id) const {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered"));
  if (it->second.info.state() == v1::NODE_STATE_LOST) {
    return absl::FailedPreconditionError(absl::StrCat("node ", node_id, " is LOST; register again"));
  }
  if (it->second.session_id != session_id) {
    return absl::FailedPreconditionError(absl::StrCat("session ", session_id, " of node ", node_id,
                                                      " is not current; register again"));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Time> NodeRegistry::Heartbeat(const std::string& node_id, int64_t session_id,
                                                   const std::string& health_failure) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(CheckSessionLocked(node_id, session_id));
  Node& node = nodes_.at(node_id);
  // The lease may have run out without ExpireLeases having run yet: a
  // heartbeat in time for the session still renews it.
  node.lease_expiry = clock_->Now() + lease_duration();
  SetHealthLocked(node, health_failure);
  return node.lease_expiry;
}

void NodeRegistry::SetHealthLocked(Node& node, const std::string& health_failure) {
  v1::NodeInfo& info = node.info;
  if (info.not_ready_reason() == health_failure) return;
  if (health_failure.empty()) {
    spdlog::info("node {} ({}) is healthy again (was: {})", info.node_id(), info.hostname(), info.not_ready_reason());
    // A drain the failure began ends with it; an operator's comes with a cordon and stays.
    if (info.cordoned_by().empty()) info.set_draining(false);
  } else {
    spdlog::warn("node {} ({}) is NOT_READY: {}", info.node_id(), info.hostname(), health_failure);
    // Moves what runs there, as a drain does (JobController::ContinueDrains).
    if (info.not_ready_reason().empty()) info.set_draining(true);
  }
  info.set_not_ready_reason(health_failure);
  info.set_state(LiveState(info));
}

std::vector<std::string> NodeRegistry::ExpireLeases() {
  std::vector<std::string> lost;
  std::vector<v1::NodeInfo> to_store;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Time now = clock_->Now();
    for (auto& [id, node] : nodes_) {
      if (node.info.state() == v1::NODE_STATE_LOST || now < node.lease_expiry) continue;
      node.info.set_state(v1::NODE_STATE_LOST);
      node.session_id = 0;
      lost.push_back(id);
      to_store.push_back(node.info);
    }
  }
  // Best effort: the lease state in the store is informational (leases
  // restart on recovery); the loss itself is acted on in memory. One
  // transaction for all of them: a mass loss must not queue one fsync per
  // node ahead of the registrations that bring them back.
  for (const v1::NodeInfo& info : to_store) {
    spdlog::info("node {} ({}) is LOST: no heartbeat for {}", info.node_id(), info.hostname(),
                 absl::FormatDuration(lease_duration()));
  }
  if (to_store.empty()) return lost;
  if (absl::Status s = store_->PutNodes(to_store).status(); !s.ok()) {
    spdlog::warn("{} lost node(s) not stored: {}", to_store.size(), s.ToString());
  }
  return lost;
}

absl::StatusOr<std::string> NodeRegistry::Resolve(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_.count(name) > 0) return name;
  std::vector<std::string> ids;
  for (auto it = by_host_.lower_bound({name, ""}); it != by_host_.end() && it->first == name; ++it) {
    ids.push_back(it->second);
  }
  if (ids.empty()) return absl::NotFoundError(absl::StrCat("node: no node has the id or hostname \"", name, "\""));
  if (ids.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("node: ", ids.size(), " nodes have the hostname \"", name,
                                                   "\" (", absl::StrJoin(ids, ", "), "); name one by its id"));
  }
  return ids.front();
}

absl::StatusOr<v1::NodeInfo> NodeRegistry::SetCordon(const std::string& node_id, const std::string& by,
                                                     const std::string& reason) {
  return Update(node_id, [&](v1::NodeInfo& info) {
    info.set_cordoned_by(by);
    info.set_cordon_reason(by.empty() ? "" : reason);
    if (by.empty()) info.set_draining(false);
  });
}

absl::StatusOr<v1::NodeInfo> NodeRegistry::StartDrain(const std::string& node_id, const std::string& by,
                                                      const std::string& reason) {
  return Update(node_id, [&](v1::NodeInfo& info) {
    if (info.cordoned_by().empty() || info.cordoned_by() == kCordonedByWorker) {
      info.set_cordoned_by(by);
      info.set_cordon_reason(reason);
    }
    info.set_draining(true);
  });
}

absl::Status NodeRegistry::EndDrain(const std::string& node_id) {
  return Update(node_id, [](v1::NodeInfo& info) { info.set_draining(false); }).status();
}

std::vector<std::string> NodeRegistry::DrainingNodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, node] : nodes_) {
    if (node.info.draining()) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<v1::NodeInfo> NodeRegistry::Update(const std::string& node_id,
                                                  const std::function<void(v1::NodeInfo&)>& change) {
  v1::NodeInfo info;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(node_id);
    if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered"));
    info = it->second.info;
  }
  change(info);
  if (info.state() != v1::NODE_STATE_LOST) {
    info.set_state(LiveState(info));
  }
  // Durable first, then in memory; the lease state is the registry's own.
  RETURN_IF_ERROR(store_->PutNode(info).status());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered"));
  v1::NodeInfo& live = it->second.info;
  live.set_cordoned_by(info.cordoned_by());
  live.set_cordon_reason(info.cordon_reason());
  live.set_draining(info.draining());
  if (live.state() != v1::NODE_STATE_LOST) {
    live.set_state(LiveState(live));
  }
  return SnapshotLocked(it->second);
}

v1::NodeInfo NodeRegistry::SnapshotLocked(const Node& node) const {
  v1::NodeInfo out = node.info;
  out.clear_credential_sha256();  // the registry's own
  *out.mutable_lease_expiry() = ToProtoTime(node.lease_expiry);
  std::map<std::pair<std::string, int64_t>, v1::NodeAllocation> allocations;
  int used_gpus = 0, used_cpu = 0;
  for (const RankSlot& s : node.slots) {
    v1::NodeAllocation& a = allocations[{s.job_id, s.generation}];
    a.set_job_id(s.job_id);
    a.set_generation(s.generation);
    a.add_global_ranks(s.global_rank);
    if (!s.gpu_uuid.empty()) {
      a.add_gpu_uuids(s.gpu_uuid);
      ++used_gpus;
    }
    a.set_cpu_slots(a.cpu_slots() + s.cpu_slots);
    used_cpu += s.cpu_slots;
  }
  for (auto& [key, a] : allocations) *out.add_allocations() = std::move(a);
  out.set_free_gpus(out.gpus_size() - used_gpus);
  out.set_free_cpu_slots(out.cpu_slots() - used_cpu);
  return out;
}

absl::StatusOr<v1::NodeInfo> NodeRegistry::GetNode(const std::string& node_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node ", node_id, " is not registered"));
  return SnapshotLocked(it->second);
}

std::vector<v1::NodeInfo> NodeRegistry::ListNodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::NodeInfo> out;
  out.reserve(nodes_.size());
  for (const auto& [hostname, id] : by_host_) out.push_back(SnapshotLocked(nodes_.at(id)));
  return out;
}

NodeRegistry::NodePage NodeRegistry::ListNodesPage(const std::vector<v1::NodeState>& states,
                                                   const std::string& after_hostname, const std::string& after_node_id,
                                                   int page_size, size_t max_bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  NodePage page;
  auto matches = [&](const Node& node) {
    return states.empty() || std::find(states.begin(), states.end(), node.info.state()) != states.end();
  };
  for (const auto& [id, node] : nodes_) page.total += matches(node) ? 1 : 0;
  const size_t wanted = static_cast<size_t>(std::max(page_size, 1));
  size_t bytes = 0;
  // In (hostname, node_id) order, strictly after the token's node.
  for (auto it = by_host_.upper_bound({after_hostname, after_node_id}); it != by_host_.end(); ++it) {
    const Node& node = nodes_.at(it->second);
    if (!matches(node)) continue;
    if (page.nodes.size() == wanted) {
      page.more = true;
      break;
    }
    v1::NodeInfo info = SnapshotLocked(node);
    bytes += info.ByteSizeLong();
    if (!page.nodes.empty() && bytes > max_bytes) {
      page.more = true;
      break;
    }
    page.nodes.push_back(std::move(info));
  }
  return page;
}

}  // namespace ringmaster::coordinator
