#include "coordinator/core/job_watchers.h"

namespace ringmaster::coordinator {

int64_t JobWatchers::Subscribe(const std::string& job_id, JobWatcher* watcher) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return 0;
  const int64_t id = next_id_++;
  watchers_[id] = {job_id, watcher};
  by_job_.emplace(job_id, id);
  return id;
}

void JobWatchers::Unsubscribe(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  auto [first, last] = by_job_.equal_range(it->second.first);
  for (auto j = first; j != last; ++j) {
    if (j->second == id) {
      by_job_.erase(j);
      break;
    }
  }
  watchers_.erase(it);
}

void JobWatchers::CloseAll(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  closed_ = true;
  for (auto& [id, watcher] : watchers_) watcher.second->OnClose(status);
}

size_t JobWatchers::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watchers_.size();
}

void JobWatchers::OnJobChanged(const v1::Job& job, const std::vector<v1::JobEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [first, last] = by_job_.equal_range(job.id());
  for (auto it = first; it != last; ++it) watchers_.at(it->second).second->OnJobChanged(job, events);
}

}  // namespace ringmaster::coordinator
