#include "worker/process_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "common/tls.h"
#include "common/utf8.h"

namespace ringmaster::worker {

ProcessSupervisor::ProcessSupervisor(ProcessControl* control, Clock* clock, ExitCallback on_exit,
                                     SupervisorOptions options)
    : control_(control), clock_(clock), on_exit_(std::move(on_exit)), options_(options) {
  reaper_ = std::thread([this] { ReapLoop(); });
}

ProcessSupervisor::~ProcessSupervisor() { Shutdown(absl::ZeroDuration()); }

StartOutcome ProcessSupervisor::Start(const std::vector<RankLaunch>& launches) {
  StartOutcome outcome;
  if (launches.empty()) return outcome;
  const std::string& job_id = launches.front().job_id;
  const int64_t generation = launches.front().generation;
  for (const RankLaunch& launch : launches) {
    if (launch.job_id != job_id || launch.generation != generation) {
      outcome.status = absl::InvalidArgumentError("start: every rank must be of the same job and generation");
      return outcome;
    }
  }
  if (generation < 1) {
    outcome.status = absl::InvalidArgumentError(absl::StrCat("start: generation must be >= 1, got ", generation));
    return outcome;
  }
  std::vector<RankExit> failed;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A survivor of the restart still on its way to AwaitRejoin (its stop
    // came, its call not yet: it is finishing a step) is waited for, at most
    // park_wait, so that this start can adopt it.
    auto on_its_way = [&] {
      for (const auto& [pid, process] : processes_) {
        if (process.job_id == job_id && process.generation < generation &&
            process.park_by != absl::InfiniteFuture()) {
          return true;
        }
      }
      return false;
    };
    clock_->WaitUntil(lock, changed_, clock_->Now() + options_.park_wait,
                      [&] { return shutting_down_ || !on_its_way(); });
    if (shutting_down_) {
      outcome.status = absl::UnavailableError("start: the worker is shutting down");
      return outcome;
    }
    JobFence& fence = jobs_[job_id];
    if (generation < fence.generation) {
      outcome.status = absl::FailedPreconditionError(absl::StrCat(
          "job ", job_id, ": generation ", generation, " is over; this node is at generation ", fence.generation));
      return outcome;
    }
    if (generation == fence.generation && fence.stopped) {
      outcome.status = absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, ": generation ", generation, " was stopped on this node"));
      return outcome;
    }
    if (generation > fence.generation) {
      for (const RankLaunch& launch : launches) AdoptLocked(launch, &outcome);
      for (auto& [pid, process] : processes_) {
        if (process.job_id == job_id && process.generation < generation) {
          spdlog::warn("job {}: generation {} supersedes rank {} of generation {}: stopping it", job_id, generation,
                       process.global_rank, process.generation);
          StopLocked(pid, process, options_.supersede_grace);
        }
      }
      fence = JobFence{generation, {}, false, false};
      for (const auto& [rank, log] : outcome.adopted) fence.started.insert(rank);
    }
    for (const RankLaunch& launch : launches) {
      if (fence.started.count(launch.global_rank) > 0) {
        outcome.started.push_back(launch.global_rank);
        continue;
      }
      const absl::Status allowed = CheckRunAs(launch);
      absl::StatusOr<int64_t> pid = allowed.ok() ? control_->Spawn(launch.process) : allowed;
      if (!pid.ok()) {
        spdlog::error("job {} generation {}: cannot start rank {}: {}", job_id, generation, launch.global_rank,
                      pid.status().ToString());
        if (outcome.status.ok()) {
          outcome.status = absl::Status(pid.status().code(),
                                        absl::StrCat("rank ", launch.global_rank, ": ", pid.status().message()));
        }
        RankExit exit;
        exit.job_id = job_id;
        exit.generation = generation;
        exit.global_rank = launch.global_rank;
        exit.exit_code = 127;
        exit.time = clock_->Now();
        exit.log_tail = std::string(pid.status().message());
        failed.push_back(std::move(exit));
        continue;
      }
      Process process;
      process.job_id = job_id;
      process.generation = generation;
      process.global_rank = launch.global_rank;
      process.start_time = clock_->Now();
      process.log_path = launch.process.log_path;
      process.secret = launch.secret;
      process.rejoinable = !launch.rejoin_context.empty();
      if (process.rejoinable) process.rejoin_key = RejoinKey(launch.process);
      processes_[*pid] = std::move(process);
      fence.started.insert(launch.global_rank);
      outcome.started.push_back(launch.global_rank);
      spdlog::info("job {} generation {}: started rank {} (pid {})", job_id, generation, launch.global_rank, *pid);
    }
  }
  std::sort(outcome.started.begin(), outcome.started.end());
  control_->Interrupt();  // the reaper recomputes its wait
  Flush();
  for (const RankExit& exit : failed) on_exit_(exit);
  return outcome;
}

int ProcessSupervisor::Stop(const std::string& job_id, int64_t generation, const std::vector<int32_t>& ranks,
                            absl::Duration grace, bool dump_state, bool restarting) {
  int signalled = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobFence& fence = jobs_[job_id];
    if (generation < fence.generation) {
      spdlog::info("job {}: ignoring a stop order for generation {} (this node is at generation {})", job_id,
                   generation, fence.generation);
      return 0;
    }
    if (generation > fence.generation) fence = JobFence{generation, {}, false};
    // Stopped as a whole before: a later order naming ranks of it (the
    // coordinator fencing a report that was on its way) leaves a survivor of
    // the restart to that first order.
    const bool stopped_before = fence.stopped && !ranks.empty();
    if (ranks.empty()) fence.stopped = true;
    const std::set<int32_t> wanted(ranks.begin(), ranks.end());
    for (auto& [pid, process] : processes_) {
      if (process.job_id != job_id) continue;
      bool older = process.generation < generation;
      bool named = process.generation == generation && (wanted.empty() || wanted.count(process.global_rank) > 0);
      if (!older && !named) continue;
      if (stopped_before && named && (process.parked || process.park_by != absl::InfiniteFuture())) continue;
      ++signalled;
      if (restarting && named && process.rejoinable && !process.stopping) {
        if (process.reply) {
          ParkLocked(pid, process);
        } else if (process.park_by == absl::InfiniteFuture()) {
          process.park_by = clock_->Now() + options_.park_wait;
          process.park_grace = grace;
          process.park_dump = dump_state;
        }
        continue;
      }
      StopLocked(pid, process, grace, dump_state && named);
    }
  }
  control_->Interrupt();
  Flush();
  return signalled;
}

absl::Status ProcessSupervisor::CheckRunAs(const RankLaunch& launch) const {
  if (!options_.require_run_as) return absl::OkStatus();
  const std::optional<SpawnOptions::Credentials>& run_as = launch.process.credentials;
  if (!run_as.has_value() || run_as->uid == 0 || run_as->gid == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", launch.global_rank, " would run with the worker's privileges (",
        run_as.has_value() ? "as root" : "no account given", "): not started"));
  }
  return absl::OkStatus();
}

void ProcessSupervisor::StopLocked(int64_t pid, Process& process, absl::Duration grace, bool dump_state) {
  const absl::Time now = clock_->Now();
  const bool dump = dump_state && grace > absl::ZeroDuration() && options_.state_dump_wait > absl::ZeroDuration();
  absl::Time kill_at = now + std::max(grace, absl::ZeroDuration());
  ReplyLocked(process, absl::FailedPreconditionError(absl::StrCat(
                           "rank ", process.global_rank, " of job ", process.job_id, " generation ",
                           process.generation, " is being stopped: it will not be adopted by a next generation")));
  process.park_by = process.adopt_by = absl::InfiniteFuture();
  if (!process.stopping) {
    process.stopping = true;
    if (dump) {
      // SIGCONT: a stopped rank could not write its dump.
      for (int sig : {SIGUSR1, SIGCONT}) {
        if (absl::Status s = control_->SignalGroup(pid, sig); !s.ok()) spdlog::warn("{}", s.ToString());
      }
      process.term_at = now + options_.state_dump_wait;
    } else if (grace > absl::ZeroDuration()) {
      if (absl::Status s = control_->SignalGroup(pid, SIGTERM); !s.ok()) spdlog::warn("{}", s.ToString());
      process.termed = true;
    }
  }
  if (!process.termed && process.term_at != absl::InfiniteFuture()) kill_at = std::max(kill_at, process.term_at + grace);
  process.kill_at = std::min(process.kill_at, kill_at);
  if (process.kill_at <= clock_->Now() && !process.killed) {
    process.killed = true;
    if (absl::Status s = control_->SignalGroup(pid, SIGKILL); !s.ok()) spdlog::warn("{}", s.ToString());
  }
}

void ProcessSupervisor::Shutdown(absl::Duration grace) {
  std::call_once(shutdown_once_, [&] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutting_down_ = true;
      if (!processes_.empty())
        spdlog::info("stopping {} rank(s) (grace {})", processes_.size(), absl::FormatDuration(grace));
      for (auto& [pid, process] : processes_) StopLocked(pid, process, grace);
    }
    control_->Interrupt();
    Flush();
    reaper_.join();
  });
}

std::vector<RunningRankInfo> ProcessSupervisor::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RunningRankInfo> out;
  for (const auto& [pid, process] : processes_) {
    out.push_back(RunningRankInfo{process.job_id, process.generation, process.global_rank, pid, process.start_time,
                                  process.stopping});
  }
  std::sort(out.begin(), out.end(), [](const RunningRankInfo& a, const RunningRankInfo& b) {
    return std::tie(a.job_id, a.generation, a.global_rank) < std::tie(b.job_id, b.generation, b.global_rank);
  });
  return out;
}

int ProcessSupervisor::RunningCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(processes_.size());
}

bool ProcessSupervisor::RunsJob(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [pid, process] : processes_) {
    if (process.job_id == job_id) return true;
  }
  return false;
}

bool ProcessSupervisor::HoldsSecret(const std::string& job_id, int64_t generation, const std::string& secret) const {
  if (secret.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [pid, process] : processes_) {
    if (process.job_id != job_id || (generation != 0 && process.generation != generation)) continue;
    if (!process.secret.empty() && ConstantTimeEquals(process.secret, secret)) return true;
  }
  return false;
}

CallerCheck ProcessSupervisor::CheckCaller(const std::string& job_id, int64_t generation, int32_t rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  CallerCheck check;
  check.job_id = job_id;
  check.generation = generation;
  if (check.job_id.empty()) {
    std::set<std::string> jobs;
    for (const auto& [pid, process] : processes_) jobs.insert(process.job_id);
    if (jobs.size() != 1) {
      check.reason = absl::StrCat("job_id is required (", jobs.size(), " jobs run on this node)");
      return check;
    }
    check.job_id = *jobs.begin();
  }
  auto fence = jobs_.find(check.job_id);
  if (fence == jobs_.end()) {
    check.reason = absl::StrCat("job ", check.job_id, " has no ranks on this node");
    return check;
  }
  if (check.generation == 0) check.generation = fence->second.generation;
  if (check.generation < fence->second.generation) {
    check.state = CallerState::kOver;
    check.reason = absl::StrCat("generation ", check.generation, " is over; current is ", fence->second.generation);
    return check;
  }
  if (check.generation > fence->second.generation) {
    check.reason = absl::StrCat("generation ", check.generation, " of job ", check.job_id,
                                " was not started on this node (current is ", fence->second.generation, ")");
    return check;
  }
  for (const auto& [pid, process] : processes_) {
    if (process.job_id != check.job_id || process.generation != check.generation || process.global_rank != rank) {
      continue;
    }
    if (process.stopping || fence->second.stopped) {
      check.state = CallerState::kOver;
      check.reason = absl::StrCat("generation ", check.generation, " of job ", check.job_id, " is being stopped");
      return check;
    }
    check.state = CallerState::kCurrent;
    check.checkpoint_requested = fence->second.checkpoint_requested;
    return check;
  }
  if (fence->second.started.count(rank) > 0) {
    check.state = CallerState::kOver;
    check.reason = absl::StrCat("rank ", rank, " of generation ", check.generation, " has exited");
    return check;
  }
  check.reason = absl::StrCat("rank ", rank, " of job ", check.job_id, " generation ", check.generation,
                              " does not run on this node");
  return check;
}

bool ProcessSupervisor::RequestCheckpoint(const std::string& job_id, int64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  auto fence = jobs_.find(job_id);
  if (fence == jobs_.end() || fence->second.generation != generation || fence->second.stopped) return false;
  fence->second.checkpoint_requested = true;
  return true;
}

void ProcessSupervisor::ReapLoop() {
  while (true) {
    absl::Duration wait;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (shutting_down_ && processes_.empty()) return;
      wait = NextWakeLocked();
    }
    std::optional<ProcessExit> exit = control_->WaitAny(wait);
    if (exit.has_value()) HandleExit(*exit);
    KillDue();
  }
}

absl::Duration ProcessSupervisor::NextWakeLocked() const {
  absl::Duration wait = options_.reap_interval;
  const absl::Time now = clock_->Now();
  for (const auto& [pid, process] : processes_) {
    for (absl::Time due : {process.rejoin_by, process.park_by, process.adopt_by}) {
      if (due != absl::InfiniteFuture()) wait = std::min(wait, std::max(due - now, absl::ZeroDuration()));
    }
    if (process.stopping && !process.killed)
      wait = std::min(wait, std::max(process.kill_at - now, absl::ZeroDuration()));
    if (process.stopping && !process.termed && !process.killed)
      wait = std::min(wait, std::max(process.term_at - now, absl::ZeroDuration()));
  }
  return wait;
}

void ProcessSupervisor::KillDue() {
  std::unique_lock<std::mutex> lock(mu_);
  const absl::Time now = clock_->Now();
  for (auto& [pid, process] : processes_) {
    if (process.rejoin_by <= now) {
      ReplyLocked(process, absl::FailedPreconditionError(
                               absl::StrCat("no restart of generation ", process.generation, " came within ",
                                            absl::FormatDuration(options_.park_wait))));
    }
    if (process.park_by <= now) {
      spdlog::info("job {} generation {}: rank {} (pid {}) did not ask to rejoin within {}: stopping it",
                   process.job_id, process.generation, process.global_rank, pid,
                   absl::FormatDuration(options_.park_wait));
      process.park_by = absl::InfiniteFuture();
      StopLocked(pid, process, process.park_grace, process.park_dump);
    }
    if (process.adopt_by <= now) {
      spdlog::info("job {} generation {}: parked rank {} (pid {}) was not adopted within {}: stopping it",
                   process.job_id, process.generation, process.global_rank, pid,
                   absl::FormatDuration(options_.adopt_wait));
      StopLocked(pid, process, options_.supersede_grace);
    }
    if (process.stopping && !process.termed && !process.killed && process.term_at <= now) {
      process.termed = true;  // its state dump had its time
      if (absl::Status s = control_->SignalGroup(pid, SIGTERM); !s.ok()) spdlog::warn("{}", s.ToString());
    }
    if (!process.stopping || process.killed || process.kill_at > now) continue;
    spdlog::warn("job {} generation {}: rank {} (pid {}) outlived its grace period: SIGKILL", process.job_id,
                 process.generation, process.global_rank, pid);
    process.killed = true;
    if (absl::Status s = control_->SignalGroup(pid, SIGKILL); !s.ok()) spdlog::warn("{}", s.ToString());
  }
  lock.unlock();
  Flush();
}

void ProcessSupervisor::HandleExit(const ProcessExit& exit) {
  Process process;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = processes_.find(exit.pid);
    if (it == processes_.end()) return;
    ReplyLocked(it->second, absl::FailedPreconditionError("the process exited"));
    process = std::move(it->second);
    processes_.erase(it);
  }
  Flush();
  // The leader is gone; what it left in its group (grandchildren) goes too.
  if (absl::Status s = control_->SignalGroup(exit.pid, SIGKILL); !s.ok()) spdlog::warn("{}", s.ToString());
  RankExit report;
  report.job_id = process.job_id;
  report.generation = process.generation;
  report.global_rank = process.global_rank;
  report.pid = exit.pid;
  report.exit_code = exit.exit_code;
  report.signal = exit.signal;
  report.stopped_by_worker = process.stopping;
  report.time = clock_->Now();
  report.log_tail = ReadTail(process.log_path);
  if (process.parked) {  // its exit was reported when it parked
    spdlog::info("job {} generation {}: parked rank {} (pid {}) ended", report.job_id, report.generation,
                 report.global_rank, report.pid);
    return;
  }
  if (exit.signal != 0) {
    spdlog::info("job {} generation {}: rank {} (pid {}) was killed by signal {}", report.job_id, report.generation,
                 report.global_rank, report.pid, report.signal);
  } else {
    spdlog::info("job {} generation {}: rank {} (pid {}) exited with status {}", report.job_id, report.generation,
                 report.global_rank, report.pid, report.exit_code);
  }
  on_exit_(report);
}

std::string ProcessSupervisor::ReadTail(const std::string& path) const {
  if (path.empty() || options_.exit_tail_bytes == 0) return "";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff take = std::min<std::streamoff>(size, static_cast<std::streamoff>(options_.exit_tail_bytes));
  in.seekg(size - take);
  std::string tail(static_cast<size_t>(take), '\0');
  in.read(tail.data(), take);
  tail.resize(static_cast<size_t>(in.gcount()));
  // Start at a character boundary, and keep it valid UTF-8 (a proto string)
  // and within the bound (replacement characters are longer than the bytes
  // they replace).
  const std::string clean = SanitizeUtf8(Utf8SafeSuffix(tail, tail.size()));
  return std::string(Utf8SafeSuffix(clean, options_.exit_tail_bytes));
}

}  // namespace ringmaster::worker
