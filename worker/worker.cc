#include "worker/worker.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cli_flags.h"
#include "common/grpc_security.h"
#include "common/metrics_http.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"
#include "worker/agent_server.h"
#include "worker/coordinator_session.h"
#include "worker/gpu_health.h"
#include "worker/health_checks.h"
#include "worker/job_dir_janitor.h"
#include "worker/job_dirs.h"
#include "worker/log_pusher.h"
#include "worker/log_shipper.h"
#include "worker/node_credential.h"
#include "worker/node_setup.h"
#include "worker/paths.h"
#include "worker/process_control.h"
#include "worker/process_supervisor.h"
#include "worker/rank_launcher.h"
#include "worker/worker_metrics.h"

namespace ringmaster::worker {
namespace {

// A Status whose message is the one line the worker logs before it exits.
absl::Status Line(const absl::Status& status, const std::string& prefix = "") {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

std::string PathFrom(const std::vector<std::string>& environment) {
  for (const std::string& entry : environment) {
    if (absl::StartsWith(entry, "PATH=")) return entry.substr(5);
  }
  return "";
}

// Without TLS the coordinator must be on this machine (docs/security.md).
absl::Status CheckPlaintextCoordinator(const std::string& coordinator) {
  std::string host;
  int port;
  if (SplitHostPort(coordinator, &host, &port).ok() && !absl::StartsWith(coordinator, "unix:") &&
      !IsLoopbackHost(host)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--coordinator ", coordinator,
                     " is not a loopback address: use TLS (--tls-ca, --tls-cert, --tls-key; see docs/security.md)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::Start(const WorkerConfig& config, Clock* clock) {
  std::unique_ptr<Worker> worker(new Worker(config, clock));
  RETURN_IF_ERROR(worker->Prepare());
  RETURN_IF_ERROR(worker->BuildMetrics());
  RETURN_IF_ERROR(worker->BuildRanks());
  RETURN_IF_ERROR(worker->BuildCoordinatorLink());
  worker->BuildJanitors();
  worker->LogStartup();
  worker->shipper_->Start();
  worker->pusher_->Start();
  worker->session_->Start();
  worker->janitor_->Start();
  worker->ranks_janitor_->Start();
  worker->health_->Start();
  return worker;
}

Worker::Worker(const WorkerConfig& config, Clock* clock) : config_(config), clock_(clock) {}

Worker::~Worker() { Shutdown(); }

absl::Status Worker::Prepare() {
  std::error_code ec;
  state_dir_ = std::filesystem::absolute(config_.state_dir, ec).lexically_normal().string();
  // Which account ranks run as, decided before anything is made: with other
  // accounts, everything the worker makes is its own alone unless it says
  // otherwise (umask 077; the ranks inherit it too).
  absl::StatusOr<RunAsPolicy> run_as = ResolveRunAs(config_.run_as, config_.run_as_map, geteuid(),
                                                    /*local_mode=*/!config_.tls.any());
  if (!run_as.ok()) return run_as.status();
  run_as_ = *std::move(run_as);
  other_accounts_ = run_as_->drops_privileges();
  if (other_accounts_) {
    umask(077);
    RaiseMemlockForRanks();
  }
  std::filesystem::create_directories(state_dir_, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create --state-dir ", state_dir_, ": ", ec.message()));
  // The trainers' socket and their jobs' directories live here: only this
  // user may list it; ranks of other accounts may pass through (0711).
  RETURN_IF_ERROR(RestrictStateDir(state_dir_, other_accounts_));
  RETURN_IF_ERROR(LockStateDir(state_dir_));
  if (config_.tls.any()) {
    absl::StatusOr<TlsMaterial> loaded = LoadTlsMaterial(config_.tls, /*require_identity=*/true);
    if (!loaded.ok()) return loaded.status();
    tls_ = std::make_unique<TlsMaterial>(*std::move(loaded));
  } else {
    RETURN_IF_ERROR(CheckPlaintextCoordinator(config_.coordinator));
  }
  if (!config_.join_token_file.empty()) {
    ASSIGN_OR_RETURN(join_token_, ReadSecretFile(config_.join_token_file, "--join-token-file"));
  }
  ASSIGN_OR_RETURN(trainer_, FindTrainer(config_.trainer, SelfExe(), PathFrom(config_.environment)));
  ASSIGN_OR_RETURN(python_sdk_, FindPythonSdk(config_.python_sdk, SelfExe()));

  const std::string hostname = config_.node_name.empty() ? Hostname() : config_.node_name;
  address_ = config_.listen_address.empty() ? hostname : config_.listen_address;
  int advertise_port;
  if (absl::Status s = SplitHostPort(address_, &advertise_host_, &advertise_port); !s.ok()) {
    return Line(s, "--listen-address: ");
  }
  absl::StatusOr<v1::NodeInfo> node = DescribeNode(hostname, address_, config_.cpu_slots, config_.labels);
  if (!node.ok()) return node.status();
  node_ = *std::move(node);
  // Reported so that `ringmaster validate` can check data.path before a run.
  for (const std::string& root : config_.data_roots) {
    node_.add_data_roots(std::filesystem::path(root).lexically_normal().string());
  }
  return absl::OkStatus();
}

absl::Status Worker::BuildMetrics() {
  ASSIGN_OR_RETURN(metrics_, WorkerMetrics::Create(&registry_, node_.hostname()));
  metrics_->SetCapacity(node_.gpus_size(), node_.cpu_slots());
  if (config_.metrics_listen.empty()) return absl::OkStatus();  // no /metrics
  std::string host;
  int port;
  if (absl::Status s = SplitHostPort(config_.metrics_listen, &host, &port); !s.ok()) {
    return Line(s, "--metrics-listen: ");
  }
  metrics_server_ = std::make_unique<MetricsHttpServer>(&registry_);
  RETURN_IF_ERROR(metrics_server_->Start(host, std::max(port, 0)));
  spdlog::info("metrics on http://{}/metrics", metrics_server_->address());
  return absl::OkStatus();
}

absl::Status Worker::BuildRanks() {
  RankLauncherOptions launcher_options;
  for (const std::string& root : config_.data_roots) {
    if (root.empty() || root[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat("--data-roots: ", root, " is not an absolute path"));
    }
    launcher_options.data_roots.push_back(std::filesystem::path(root).lexically_normal().string());
  }
  ASSIGN_OR_RETURN(launcher_options.node_env, NodeRankEnv(config_.rank_env, config_.environment));

  control_ = std::make_unique<RealProcessControl>();
  shipper_ = std::make_unique<LogShipper>(clock_);
  SupervisorOptions supervisor_options;
  supervisor_options.state_dump_wait = config_.state_dump_wait;
  supervisor_options.require_run_as = other_accounts_;
  supervisor_ = std::make_unique<ProcessSupervisor>(
      control_.get(), clock_,
      [this](const RankExit& exit) {
        shipper_->Finish(exit.job_id, exit.generation, exit.global_rank);
        metrics_->RankExited(exit.job_id, exit.generation, exit.global_rank);
        if (session_ != nullptr) session_->ReportExit(exit);
      },
      supervisor_options);

  launcher_options.state_dir = state_dir_;
  launcher_options.trainer_path = trainer_;
  launcher_options.python_sdk_dir = python_sdk_;
  launcher_options.agent_socket = AgentSocketPath(state_dir_);
  launcher_options.advertise_host = advertise_host_;
  launcher_options.allowed_env = config_.allowed_env;
  launcher_options.run_as = *run_as_;
  launcher_options.default_grace = config_.stop_grace_period;
  launcher_ = std::make_unique<RankLauncher>(supervisor_.get(), shipper_.get(), launcher_options);
  return absl::OkStatus();
}

absl::Status Worker::BuildCoordinatorLink() {
  RetryPolicy retry;
  retry.initial = config_.reconnect_initial;
  retry.max = config_.reconnect_max;
  // Which node this is: issued by the coordinator, sent with every call.
  credential_ = std::make_unique<NodeCredential>(NodeCredentialPath(state_dir_));
  RETURN_IF_ERROR(credential_->Load());
  channel_ = CoordinatorChannel(config_.coordinator, retry, tls_.get(), join_token_, credential_.get());

  RETURN_IF_ERROR(BuildHealthChecks());
  CoordinatorSessionOptions session_options;
  session_options.node = node_;
  session_options.node_id_path = NodeIdPath(state_dir_);
  session_options.credential = credential_.get();
  session_options.heartbeat_interval = config_.heartbeat_interval;
  session_options.retry = retry;
  session_options.health = health_.get();
  session_ = std::make_unique<CoordinatorSession>(channel_, clock_, launcher_.get(), supervisor_.get(),
                                                  metrics_.get(), session_options);

  agent_ = std::make_unique<AgentServer>(
      supervisor_.get(), metrics_.get(),
      [this](const v1::RankProgress& progress) { session_->ReportProgress(progress); }, channel_,
      AgentServerOptions{AgentSocketPath(state_dir_), static_cast<mode_t>(other_accounts_ ? 0666 : 0600)});
  RETURN_IF_ERROR(agent_->Start());
  pusher_ = std::make_unique<LogPusher>(
      channel_, shipper_.get(), [this] { return session_->node_id(); }, retry, absl::Seconds(10), clock_);
  metrics_->SetRanksRunningSource([this] { return static_cast<double>(supervisor_->RunningCount()); });
  metrics_->SetLogLinesDroppedSource([this] { return static_cast<double>(shipper_->dropped_lines()); });
  return absl::OkStatus();
}

absl::Status Worker::BuildHealthChecks() {
  HealthCheckOptions options;
  options.disk_paths = {state_dir_};
  for (const std::string& disk : config_.health_disks) options.disk_paths.push_back(disk);
  options.min_free_bytes = config_.health_min_free_mb << 20;
  options.data_roots = config_.data_roots;
  options.require_data_roots = config_.require_data_roots;
  for (const std::string& script : config_.health_checks) {
    if (!std::filesystem::path(script).is_absolute() || ::access(script.c_str(), X_OK) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--health-check: ", script, " is not an executable file named by an absolute path"));
    }
  }
  options.scripts = config_.health_checks;
  options.script_timeout = config_.health_check_timeout;
  options.interval = config_.health_interval;
  options.output_dir = state_dir_ + "/health";
  if (config_.health_gpu && node_.gpus_size() > 0) options.gpu = OpenGpuHealth();
  health_ = std::make_unique<HealthChecks>(std::move(options), clock_);
  // The first registration's heartbeat already says whether the node is fit.
  const std::string failure = health_->Run();
  if (!failure.empty()) spdlog::warn("the node starts NOT_READY: {}", failure);
  return absl::OkStatus();
}

std::shared_ptr<GpuCheck> Worker::OpenGpuHealth() const {
  std::vector<RegisteredGpu> gpus;
  for (const v1::GpuInfo& gpu : node_.gpus()) gpus.push_back({gpu.index(), gpu.uuid()});
  absl::StatusOr<std::unique_ptr<GpuHealth>> health = GpuHealth::Open(std::move(gpus));
  if (!health.ok()) {
    // The driver installs libnvidia-ml with itself: without it the GPUs are
    // not checked, which is no reason to refuse them work.
    spdlog::warn("GPU health checks off (--health-gpu): NVML: {}", std::string(health.status().message()));
    return nullptr;
  }
  return std::move(*health);
}

void Worker::BuildJanitors() {
  const JobRetention retention{absl::Seconds(config_.job_retention_days * 86400), config_.job_retention_count};
  auto active_jobs = [this] {
    std::set<std::string> active;
    for (const RunningRankInfo& rank : supervisor_->Running()) active.insert(rank.job_id);
    return active;
  };
  janitor_ = std::make_unique<JobDirJanitor>(JobsDir(state_dir_), retention, active_jobs);
  // The jobs' own directories, removed as their owners (worker/job_dirs.h).
  ranks_janitor_ = std::make_unique<JobDirJanitor>(RanksDir(state_dir_), retention, active_jobs, absl::Minutes(10),
                                                   RemoveOwnedTree);
}

void Worker::LogStartup() const {
  spdlog::info("worker {} on {} ({} GPU(s), {} CPU slot(s)); trainer {}; Python SDK {}; state in {}; coordinator {}",
               kVersion, address_, node_.gpus_size(), node_.cpu_slots(), trainer_,
               python_sdk_.empty() ? "none" : python_sdk_, state_dir_, config_.coordinator);
  spdlog::info("ranks run as {}", run_as_->Describe());
  if (!other_accounts_ && config_.tls.any()) {
    spdlog::warn("ranks run as the worker's own account (--run-as self) and can read its key, join token and state "
                 "directory; --run-as ACCOUNT or --run-as owner runs them unprivileged (docs/security.md)");
  } else if (!other_accounts_ && geteuid() == 0) {
    spdlog::warn("ranks run as root, with the worker's privileges (local mode); --run-as ACCOUNT or --run-as owner "
                 "runs them unprivileged (docs/security.md)");
  }
  if (other_accounts_) WarnIfNotExecutableByOthers(trainer_);
}

void Worker::RequestDrain(const std::string& reason) {
  if (session_ != nullptr) session_->RequestDrain(reason);
}

int Worker::running_ranks() const { return supervisor_ != nullptr ? supervisor_->RunningCount() : 0; }

std::string Worker::metrics_address() const { return metrics_server_ != nullptr ? metrics_server_->address() : ""; }

void Worker::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  // Parts a failed Start never built are null.
  if (supervisor_ != nullptr) {
    spdlog::info("stopping {} rank(s), grace {}", supervisor_->RunningCount(),
                 absl::FormatDuration(config_.stop_grace_period));
    supervisor_->Shutdown(config_.stop_grace_period);  // every exit reported to the session
  }
  if (janitor_ != nullptr) janitor_->Stop();
  if (ranks_janitor_ != nullptr) ranks_janitor_->Stop();
  if (agent_ != nullptr) agent_->Stop();
  if (shipper_ != nullptr) shipper_->Close();
  if (pusher_ != nullptr) pusher_->Stop(absl::Seconds(2));
  if (session_ != nullptr) session_->Stop(absl::Seconds(5));
  if (health_ != nullptr) health_->Stop();
  if (metrics_ != nullptr) {
    metrics_->SetRanksRunningSource(nullptr);
    metrics_->SetLogLinesDroppedSource(nullptr);
  }
  if (metrics_server_ != nullptr) metrics_server_->Stop();
  if (session_ != nullptr) spdlog::info("worker stopped");
}

}  // namespace ringmaster::worker
