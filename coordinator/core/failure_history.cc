#include "coordinator/core/failure_history.h"

namespace ringmaster::coordinator {

void NodeFailureLog::Record(const std::string& node_id, absl::Time now, absl::Duration window) {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<absl::Time>& times = failures_[node_id];
  times.push_back(now);
  while (!times.empty() && now - times.front() > window) times.pop_front();
}

int NodeFailureLog::CountSince(const std::set<std::string>& nodes, absl::Time since) const {
  std::lock_guard<std::mutex> lock(mu_);
  int count = 0;
  for (const std::string& node : nodes) {
    auto it = failures_.find(node);
    if (it == failures_.end()) continue;
    for (absl::Time t : it->second) count += t >= since ? 1 : 0;
  }
  return count;
}

}  // namespace ringmaster::coordinator
