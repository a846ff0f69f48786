#include "worker/job_dir_janitor.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace ringmaster::worker {
namespace {

namespace fs = std::filesystem;

absl::Time ModTime(const fs::path& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::InfinitePast();
  return absl::TimeFromTimespec(st.st_mtim);
}

// The newest modification of a job's directory, its generation directories
// and the files directly in them (the ranks' logs); deeper working
// directories change only while their rank runs, which also appends to its log.
absl::Time NewestChange(const fs::path& job_dir) {
  absl::Time newest = ModTime(job_dir);
  std::error_code ec;
  for (const fs::directory_entry& gen : fs::directory_iterator(job_dir, ec)) {
    newest = std::max(newest, ModTime(gen.path()));
    if (!gen.is_directory(ec) || gen.is_symlink(ec)) continue;
    std::error_code inner;
    for (const fs::directory_entry& file : fs::directory_iterator(gen.path(), inner)) {
      newest = std::max(newest, ModTime(file.path()));
    }
  }
  return newest;
}

}  // namespace

PruneResult PruneJobDirs(const std::string& jobs_dir, const std::set<std::string>& active, absl::Time now,
                         const JobRetention& retention, const RemoveTree& remove) {
  PruneResult result;
  std::error_code ec;
  if (!fs::exists(jobs_dir, ec)) return result;
  struct Finished {
    absl::Time changed;
    std::string job;
  };
  std::vector<Finished> finished;
  for (const fs::directory_entry& entry : fs::directory_iterator(jobs_dir, ec)) {
    const std::string job = entry.path().filename().string();
    if (!entry.is_directory(ec) || entry.is_symlink(ec) || active.count(job) > 0) continue;
    finished.push_back({NewestChange(entry.path()), job});
  }
  if (ec) result.errors.push_back(absl::StrCat(jobs_dir, ": ", ec.message()));
  // Newest first: the first max_count are kept unless too old.
  std::sort(finished.begin(), finished.end(), [](const Finished& a, const Finished& b) {
    return a.changed != b.changed ? a.changed > b.changed : a.job < b.job;
  });
  for (size_t i = 0; i < finished.size(); ++i) {
    const bool too_many = retention.max_count >= 0 && i >= static_cast<size_t>(retention.max_count);
    const bool too_old = retention.max_age > absl::ZeroDuration() && now - finished[i].changed > retention.max_age;
    if (!too_many && !too_old) continue;
    if (remove != nullptr) {
      if (absl::Status s = remove(jobs_dir, finished[i].job); !s.ok()) {
        result.errors.push_back(std::string(s.message()));
      } else {
        result.removed.push_back(finished[i].job);
      }
      continue;
    }
    std::error_code removed;
    fs::remove_all(fs::path(jobs_dir) / finished[i].job, removed);
    if (removed) {
      result.errors.push_back(absl::StrCat(jobs_dir, "/", finished[i].job, ": ", removed.message()));
    } else {
      result.removed.push_back(finished[i].job);
    }
  }
  return result;
}

JobDirJanitor::JobDirJanitor(std::string jobs_dir, JobRetention retention,
                             std::function<std::set<std::string>()> active, absl::Duration interval, RemoveTree remove)
    : jobs_dir_(std::move(jobs_dir)),
      retention_(retention),
      active_(std::move(active)),
      interval_(interval),
      remove_(std::move(remove)) {}

JobDirJanitor::~JobDirJanitor() { Stop(); }

void JobDirJanitor::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void JobDirJanitor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JobDirJanitor::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const PruneResult result = PruneJobDirs(jobs_dir_, active_(), absl::Now(), retention_, remove_);
    if (!result.removed.empty()) {
      spdlog::info("removed the directories of {} finished job(s) under {} (retention)", result.removed.size(),
                   jobs_dir_);
    }
    for (const std::string& error : result.errors) spdlog::warn("job directory retention: {}", error);
    lock.lock();
    cv_.wait_for(lock, absl::ToChronoMilliseconds(interval_), [this] { return stop_; });
  }
}

}  // namespace ringmaster::worker
