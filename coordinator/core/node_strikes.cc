#include "coordinator/core/node_strikes.h"

#include <algorithm>

namespace ringmaster::coordinator {

bool NodeStrikes::Record(const std::string& node_id, absl::Time now, const NodeStrikePolicy& policy) {
  if (policy.limit <= 0) return false;
  std::vector<absl::Time>& times = failures_[node_id];
  times.erase(std::remove_if(times.begin(), times.end(), [&](absl::Time t) { return now - t >= policy.cooldown; }),
              times.end());
  times.push_back(now);
  return static_cast<int>(times.size()) == policy.limit;
}

std::set<std::string> NodeStrikes::Excluded(absl::Time now, const NodeStrikePolicy& policy) const {
  std::set<std::string> excluded;
  if (policy.limit <= 0) return excluded;
  // Each list holds the failures within `cooldown` of its newest (Record
  // prunes), so reaching the limit means the cool-down began at the newest.
  for (const auto& [node_id, times] : failures_) {
    if (static_cast<int>(times.size()) >= policy.limit && now - times.back() < policy.cooldown) {
      excluded.insert(node_id);
    }
  }
  return excluded;
}

}  // namespace ringmaster::coordinator
