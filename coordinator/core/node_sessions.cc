#include "coordinator/core/node_sessions.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/core/orders_proto.h"
#include "spdlog/spdlog.h"

namespace ringmaster::coordinator {

NodeSessions::NodeSessions(const JobController* controller, const NodeRegistry* nodes, NodeSessionsOptions options)
    : controller_(controller), nodes_(nodes), options_(options) {}

absl::Status NodeSessions::Attach(const std::string& node_id, int64_t session_id, SessionSink* sink) {
  RETURN_IF_ERROR(nodes_->CheckSession(node_id, session_id));
  absl::Status status;
  controller_->reconciler().AssignmentsForNode(node_id, [&](const std::vector<StartOrder>& orders) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      status = absl::UnavailableError("the coordinator is shutting down");
      return;
    }
    Session& session = sessions_[node_id];
    if (session.sink != nullptr && session.sink != sink) {
      session.sink->Close(absl::FailedPreconditionError(absl::StrCat(
          "session ", session.session_id, " of node ", node_id, " was superseded by session ", session_id)));
    }
    session = {session_id, sink};
    auto pending = pending_stops_.find(node_id);
    if (pending != pending_stops_.end()) {
      for (v1::StopRanks& stop : pending->second) {
        v1::CoordinatorMessage message;
        *message.mutable_stop() = std::move(stop);
        sink->Send(std::move(message));
      }
      pending_stops_.erase(pending);
    }
    for (const StartOrder& order : orders) {
      v1::CoordinatorMessage message;
      *message.mutable_start() = StartRanksProto(order);
      sink->Send(std::move(message));
    }
  });
  return status;
}

void NodeSessions::Detach(const std::string& node_id, SessionSink* sink) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(node_id);
  if (it != sessions_.end() && it->second.sink == sink) sessions_.erase(it);
}

void NodeSessions::CloseInvalid() {
  // Checked outside this lock, all under one registry lock: holding this
  // lock across one registry lock per session (thousands) kept Attach and
  // the job's start and stop orders waiting every tick. A session found
  // invalid stays invalid (a node leaves LOST only by registering again,
  // with a new session id), so the answer holds when acted on below.
  std::vector<std::pair<std::string, int64_t>> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [node_id, session] : sessions_) open.emplace_back(node_id, session.session_id);
  }
  const std::vector<absl::Status> checked = nodes_->CheckSessions(open);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < open.size(); ++i) {
    if (checked[i].ok()) continue;
    auto it = sessions_.find(open[i].first);
    // Still the session that was checked (not detached or replaced since).
    if (it == sessions_.end() || it->second.session_id != open[i].second) continue;
    spdlog::info("closing the session of node {}: {}", it->first, std::string(checked[i].message()));
    it->second.sink->Close(checked[i]);
    sessions_.erase(it);
  }
}

void NodeSessions::CloseAll(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (auto& [node_id, session] : sessions_) session.sink->Close(status);
  sessions_.clear();
}

size_t NodeSessions::open_sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

void NodeSessions::OnStartRanks(const StartOrder& order) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(order.node_id);
  if (it == sessions_.end()) return;  // the next session's Attach sends it
  v1::CoordinatorMessage message;
  *message.mutable_start() = StartRanksProto(order);
  it->second.sink->Send(std::move(message));
}

void NodeSessions::OnStopRanks(const StopOrder& order) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(order.node_id);
  if (it != sessions_.end()) {
    v1::CoordinatorMessage message;
    *message.mutable_stop() = StopRanksProto(order);
    it->second.sink->Send(std::move(message));
    return;
  }
  std::deque<v1::StopRanks>& pending = pending_stops_[order.node_id];
  if (pending.size() >= options_.max_pending_stops) {
    spdlog::warn("node {}: too many stop orders kept for its next session; dropping the oldest", order.node_id);
    pending.pop_front();
  }
  pending.push_back(StopRanksProto(order));
}

void NodeSessions::OnCheckpointNow(const CheckpointOrder& order) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(order.node_id);
  if (it == sessions_.end()) return;  // the drain sends it again
  v1::CoordinatorMessage message;
  v1::CheckpointNow& checkpoint = *message.mutable_checkpoint();
  checkpoint.set_job_id(order.job_id);
  checkpoint.set_generation(order.generation);
  checkpoint.set_reason(order.reason);
  it->second.sink->Send(std::move(message));
}

}  // namespace ringmaster::coordinator
