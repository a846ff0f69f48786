// ProcessSupervisor: rejoining (see the header): survivors of a restart park
// and the next generation's start adopts their processes.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "worker/process_supervisor.h"

namespace ringmaster::worker {

// What a launch that adopts a parked process must share with the launch that
// started it: the program, its environment and its account (not the context,
// the working directory or the log, which are per generation).
std::string ProcessSupervisor::RejoinKey(const SpawnRequest& process) {
  std::string key = absl::StrCat(process.path, "\n", process.argv.empty() ? "" : process.argv[0], "\n");
  for (const std::string& variable : process.env) absl::StrAppend(&key, variable, "\n");
  if (process.credentials.has_value()) {
    absl::StrAppend(&key, process.credentials->uid, ":", process.credentials->gid);
    for (gid_t group : process.credentials->groups) absl::StrAppend(&key, ",", group);
  }
  return key;
}

bool ProcessSupervisor::AdoptLocked(const RankLaunch& launch, StartOutcome* outcome) {
  if (launch.rejoin_context.empty()) return false;
  const std::string key = RejoinKey(launch.process);
  auto chosen = processes_.end();
  for (auto it = processes_.begin(); it != processes_.end(); ++it) {
    const Process& p = it->second;
    if (p.job_id != launch.job_id || p.generation >= launch.generation || !p.parked || !p.reply ||
        p.rejoin_key != key) {
      continue;
    }
    if (chosen == processes_.end() || p.global_rank == launch.global_rank) chosen = it;
    if (p.global_rank == launch.global_rank) break;
  }
  if (chosen == processes_.end()) return false;
  Process& process = chosen->second;
  spdlog::info("job {} generation {}: rank {} is the process (pid {}) of rank {} of generation {}", launch.job_id,
               launch.generation, launch.global_rank, chosen->first, process.global_rank, process.generation);
  ReplyLocked(process, launch.rejoin_context);
  process.parked = false;
  process.adopt_by = absl::InfiniteFuture();
  process.generation = launch.generation;
  process.global_rank = launch.global_rank;
  process.secret = launch.secret;
  process.start_time = clock_->Now();
  outcome->adopted[launch.global_rank] = process.log_path;
  return true;
}

void ProcessSupervisor::ReplyLocked(Process& process, absl::StatusOr<std::string> answer) {
  if (!process.reply) return;
  replies_due_.emplace_back(std::move(process.reply), std::move(answer));
  process.reply = nullptr;
  process.rejoin_by = absl::InfiniteFuture();
}

void ProcessSupervisor::ParkLocked(int64_t pid, Process& process) {
  const absl::Time now = clock_->Now();
  process.parked = true;
  process.park_by = process.rejoin_by = absl::InfiniteFuture();
  process.adopt_by = now + options_.adopt_wait;
  spdlog::info("job {} generation {}: rank {} (pid {}) waits in its process for the next generation", process.job_id,
               process.generation, process.global_rank, pid);
  RankExit report;
  report.job_id = process.job_id;
  report.generation = process.generation;
  report.global_rank = process.global_rank;
  report.pid = pid;
  report.exit_code = 0;
  report.stopped_by_worker = true;
  report.time = now;
  exits_due_.push_back(std::move(report));
}

uint64_t ProcessSupervisor::AwaitRejoin(const std::string& job_id, int64_t generation, int32_t rank,
                                        RejoinReply reply) {
  uint64_t token = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    token = ++next_reply_token_;
    auto it = std::find_if(processes_.begin(), processes_.end(), [&](const auto& entry) {
      return entry.second.job_id == job_id && entry.second.generation == generation &&
             entry.second.global_rank == rank;
    });
    std::string refused;
    if (it == processes_.end()) {
      refused = absl::StrCat("rank ", rank, " of job ", job_id, " generation ", generation, " does not run here");
    } else if (!it->second.rejoinable) {
      refused = absl::StrCat("rank ", rank, " of job ", job_id, " was not started rejoinable");
    } else if (it->second.stopping || shutting_down_) {
      refused = absl::StrCat("rank ", rank, " of job ", job_id, " generation ", generation, " is being stopped");
    }
    if (!refused.empty()) {
      replies_due_.emplace_back(std::move(reply), absl::FailedPreconditionError(refused));
    } else {
      Process& process = it->second;
      ReplyLocked(process, absl::CancelledError("a newer call of the same rank replaced this one"));
      process.reply = std::move(reply);
      process.reply_token = token;
      if (process.park_by != absl::InfiniteFuture()) {
        ParkLocked(it->first, process);  // the restarting stop came first
      } else if (!process.parked) {
        process.rejoin_by = clock_->Now() + options_.park_wait;
      }
    }
  }
  control_->Interrupt();
  Flush();
  return token;
}

void ProcessSupervisor::CancelRejoin(uint64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [pid, process] : processes_) {
    if (process.reply && process.reply_token == token) {
      process.reply = nullptr;
      process.rejoin_by = absl::InfiniteFuture();
    }
  }
}

void ProcessSupervisor::Flush() {
  std::vector<std::pair<RejoinReply, absl::StatusOr<std::string>>> replies;
  std::vector<RankExit> exits;
  {
    std::lock_guard<std::mutex> lock(mu_);
    replies.swap(replies_due_);
    exits.swap(exits_due_);
  }
  for (auto& [reply, answer] : replies) reply(std::move(answer));
  for (const RankExit& exit : exits) on_exit_(exit);
  changed_.notify_all();
}

}  // namespace ringmaster::worker
