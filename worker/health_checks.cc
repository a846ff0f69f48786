#include "worker/health_checks.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "spdlog/spdlog.h"

namespace ringmaster::worker {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// How often a running script is looked at (it has no event to wait on).
constexpr absl::Duration kScriptPoll = absl::Milliseconds(20);
// A reason is one line of at most this many bytes.
constexpr size_t kMaxReason = 300;

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (!trimmed.empty()) return std::string(trimmed.substr(0, kMaxReason));
  }
  return "";
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

absl::StatusOr<int64_t> AvailableBytes(const std::string& path) {
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  return static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
}

HealthChecks::HealthChecks(HealthCheckOptions options, Clock* clock, FreeSpace free_space)
    : options_(std::move(options)), clock_(clock), free_space_(std::move(free_space)) {}

HealthChecks::~HealthChecks() { Stop(); }

std::string HealthChecks::CheckFileSystems(const std::vector<std::string>& extra_paths) const {
  if (options_.min_free_bytes > 0) {
    std::vector<std::string> paths = options_.disk_paths;
    for (const std::string& p : extra_paths) {
      if (std::filesystem::exists(p)) paths.push_back(p);
    }
    for (const std::string& path : paths) {
      absl::StatusOr<int64_t> free = free_space_(path);
      if (!free.ok()) return absl::StrCat("free space: cannot examine ", free.status().message());
      if (*free < options_.min_free_bytes) {
        return absl::StrCat("free space: ", path, " has ", *free / kMiB, " MiB available, below --health-min-free-mb ",
                            options_.min_free_bytes / kMiB);
      }
    }
  }
  if (options_.require_data_roots) {
    for (const std::string& root : options_.data_roots) {
      if (!IsDirectory(root)) return absl::StrCat("data roots: ", root, " is not a directory here (--data-roots)");
    }
  }
  return "";
}

std::string HealthChecks::RunScript(const std::string& script, int index) const {
  const std::string output = absl::StrCat(options_.output_dir, "/check-", index, ".out");
  std::error_code ignored;
  std::filesystem::remove(output, ignored);
  SpawnOptions spawn;
  spawn.path = script;
  spawn.output_path = output;
  spawn.group = SpawnOptions::Group::kNewGroup;  // killed as a whole on a timeout
  absl::StatusOr<pid_t> pid = Spawn(spawn);
  if (!pid.ok()) return absl::StrCat("health check ", script, ": ", pid.status().message());
  const absl::Time deadline = absl::Now() + options_.script_timeout;
  std::optional<ProcessExit> exit;
  while (!(exit = TryReap(*pid)).has_value() && absl::Now() < deadline) absl::SleepFor(kScriptPoll);
  if (!exit.has_value()) {
    ::kill(-*pid, SIGKILL);
    while (!TryReap(*pid).has_value()) absl::SleepFor(kScriptPoll);
    return absl::StrCat("health check ", script, ": no answer within ",
                        absl::FormatDuration(options_.script_timeout), " (--health-check-timeout)");
  }
  ::kill(-*pid, SIGKILL);  // what it left running in its group
  if (exit->Succeeded()) return "";
  const std::string line = FirstLine(output);
  return absl::StrCat("health check ", script, ": ", line.empty() ? exit->Describe() : line);
}

std::string HealthChecks::CheckScripts() const {
  for (size_t i = 0; i < options_.scripts.size(); ++i) {
    std::string failure = RunScript(options_.scripts[i], static_cast<int>(i));
    if (!failure.empty()) return failure;
  }
  return "";
}

std::string HealthChecks::Run() {
  if (!options_.scripts.empty()) {
    std::error_code ignored;
    std::filesystem::create_directories(options_.output_dir, ignored);
  }
  const std::string scripts = CheckScripts();
  const std::string fs = CheckFileSystems({});
  const std::string gpu = options_.gpu != nullptr ? options_.gpu->Check() : "";
  const std::string failure = !fs.empty() ? fs : !gpu.empty() ? gpu : scripts;
  std::lock_guard<std::mutex> lock(mu_);
  if (failure != failure_) {
    if (failure.empty()) {
      spdlog::info("health checks pass again");
    } else {
      spdlog::warn("health check failing, the node is NOT_READY: {}", failure);
    }
  }
  scripts_failure_ = scripts;
  gpu_failure_ = gpu;
  failure_ = failure;
  return failure;
}

std::string HealthChecks::Failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

std::string HealthChecks::CheckBeforePlacement(const std::vector<std::string>& extra_paths) {
  std::string now = CheckFileSystems(extra_paths);
  if (now.empty() && options_.gpu != nullptr) now = options_.gpu->CheckCount();
  std::lock_guard<std::mutex> lock(mu_);
  if (now.empty()) return !gpu_failure_.empty() ? gpu_failure_ : scripts_failure_;
  if (now != failure_) spdlog::warn("health check failing before a placement, the node is NOT_READY: {}", now);
  failure_ = now;  // until the next Run
  return now;
}

void HealthChecks::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Loop(); });
}

void HealthChecks::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (clock_->WaitUntil(lock, cv_, clock_->Now() + options_.interval, [&] { return stopping_; })) return;
    }
    Run();
  }
}

void HealthChecks::Stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
}

}  // namespace ringmaster::worker
