#ifndef RINGMASTER_WORKER_JOB_DIR_JANITOR_H_
#define RINGMASTER_WORKER_JOB_DIR_JANITOR_H_

// Retention of the worker's per-job directories (<state-dir>/jobs/<job>: the
// ranks' logs and working directories). A job's directory is removed once no
// rank of the job runs here and either it is older than max_age (its newest
// modification: the directory, its generations and their files) or more
// recent finished jobs than max_count have a directory. The ranks' logs were
// shipped to the coordinator long before (LogShipper), which keeps its own
// copy under its own retention.
//
// PruneJobDirs is the policy, on a directory and a time given to it;
// JobDirJanitor runs it now and then on a thread of its own.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ringmaster::worker {

struct JobRetention {
  absl::Duration max_age = absl::Hours(7 * 24);  // <= 0: no age limit
  int max_count = 200;                            // finished jobs kept, newest first; < 0: no limit
};

struct PruneResult {
  std::vector<std::string> removed;  // job ids
  std::vector<std::string> errors;   // what could not be read or removed
};

// Removes `dir`/`name` and everything in it (worker/job_dirs.h
// RemoveOwnedTree for the ranks' own directories); null: std::filesystem's
// remove_all.
using RemoveTree = std::function<absl::Status(const std::string& dir, const std::string& name)>;

// Prunes `jobs_dir` (<state-dir>/jobs, or <state-dir>/ranks) at time `now`;
// `active` holds the jobs with ranks running (or starting) here, which are
// never touched.
PruneResult PruneJobDirs(const std::string& jobs_dir, const std::set<std::string>& active, absl::Time now,
                         const JobRetention& retention, const RemoveTree& remove = nullptr);

class JobDirJanitor {
 public:
  // `active` returns the jobs with ranks here (ProcessSupervisor::Running).
  JobDirJanitor(std::string jobs_dir, JobRetention retention, std::function<std::set<std::string>()> active,
                absl::Duration interval = absl::Minutes(10), RemoveTree remove = nullptr);
  ~JobDirJanitor();  // Stop()

  // Prunes at once, then every interval until Stop.
  void Start();
  void Stop();

 private:
  void Loop();

  const std::string jobs_dir_;
  const JobRetention retention_;
  const std::function<std::set<std::string>()> active_;
  const absl::Duration interval_;
  const RemoveTree remove_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace ringmaster::worker

#endif  // RINGMASTER_WORKER_JOB_DIR_JANITOR_H_
