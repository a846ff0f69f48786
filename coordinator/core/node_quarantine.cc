#include "coordinator/core/node_quarantine.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::coordinator {

std::optional<std::string> NodeQuarantine::Record(const std::string& node_id, const std::string& job_id,
                                                  absl::Time now, const QuarantinePolicy& policy) {
  if (policy.jobs <= 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, absl::Time>& jobs = failures_[node_id];
  jobs[job_id] = now;
  std::vector<std::string> recent;
  for (auto it = jobs.begin(); it != jobs.end();) {
    if (now - it->second >= policy.window) {
      it = jobs.erase(it);
    } else {
      recent.push_back(it->first);
      ++it;
    }
  }
  if (static_cast<int>(recent.size()) < policy.jobs || !quarantined_.insert(node_id).second) return std::nullopt;
  return absl::StrCat("quarantined: ranks of ", recent.size(), " jobs failed here within ",
                      absl::FormatDuration(policy.window), " (", absl::StrJoin(recent, ", "),
                      "); uncordon it once the node is checked");
}

void NodeQuarantine::Forget(const std::string& node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(node_id);
  quarantined_.erase(node_id);
}

}  // namespace ringmaster::coordinator
