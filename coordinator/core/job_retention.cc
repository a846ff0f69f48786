#include "coordinator/core/job_retention.h"

#include <algorithm>

namespace ringmaster::coordinator {

std::vector<std::string> SelectExpired(std::vector<FinishedJob> finished, const JobRetention& retention,
                                       absl::Time now) {
  // Newest first; the first max_count are kept unless too old.
  std::sort(finished.begin(), finished.end(), [](const FinishedJob& a, const FinishedJob& b) {
    return a.ended != b.ended ? a.ended > b.ended : a.submit_seq > b.submit_seq;
  });
  std::vector<std::string> expired;
  for (size_t i = 0; i < finished.size(); ++i) {
    const bool too_many = retention.max_count >= 0 && i >= static_cast<size_t>(retention.max_count);
    const bool too_old = retention.max_age > absl::ZeroDuration() && now - finished[i].ended > retention.max_age;
    if (too_many || too_old) expired.push_back(finished[i].id);
  }
  return expired;
}

}  // namespace ringmaster::coordinator
