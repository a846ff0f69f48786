// ringmaster-coordinator: queues, gang-schedules and supervises training jobs.
//
//   ringmaster-coordinator [--listen HOST:PORT] [--state-dir DIR] [--metrics-listen HOST:PORT]
//                          [--health-listen HOST:PORT]
//                          [--heartbeat-interval 1s] [--rendezvous-timeout 5m]
//                          [--stop-grace-period 30s] [--shutdown-timeout 5s] [--checkpoint-root DIR]
//                          [--node-recovery-grace 60s] [--log-quota-per-job 256MiB] [--disk-reserve 1GiB|5%]
//                          [--tls-ca FILE --tls-cert FILE --tls-key FILE] [--token-file FILE]
//                          [--join-token-file FILE] [--visibility team|open] [log flags]
//
// Reads the flags (the only place they are read), builds the coordinator
// (coordinator_server.h: store -> registries -> controller -> services ->
// server), serves until SIGINT/SIGTERM, then shuts down gracefully. A startup
// error (the database cannot be opened, the port is in use) is one line on
// stderr and exit status 1.
#include <csignal>
#include <atomic>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <tuple>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/cli_flags.h"
#include "common/clock.h"
#include "common/env_policy.h"
#include "common/signals.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/store/disk_space.h"
#include "fmt/core.h"
#include "grpc/support/log.h"
#include "spdlog/spdlog.h"

namespace {

using ringmaster::coordinator::CoordinatorConfig;
using ringmaster::coordinator::CoordinatorServer;

struct Flags {
  ringmaster::CommonFlags common;
  CoordinatorConfig config;
  std::string heartbeat_interval = "1s";
  std::string rendezvous_timeout = "5m";
  std::string stop_grace_period = "30s";
  std::string drain_checkpoint_timeout = "5m";
  std::string quarantine_window = "1h";
  std::string straggler_move_window = "30m";
  std::string checkpoint_interval_min = "2s";
  std::string checkpoint_interval_max = "1h";
  std::string checkpoint_mtbf_prior = "4h";
  std::string checkpoint_failure_window = "24h";
  std::string preemption_grace = "5m";
  std::string shutdown_timeout = "5s";
  std::string node_recovery_grace = "60s";
  double job_retention_days = 30;
  std::string disk_reserve;  // empty: CoordinatorConfig's default
  std::string visibility = "team";
};

// While starting, gRPC's errors are ours to report (one line, from Start).
std::atomic<bool> g_starting{true};

// gRPC's own log lines go through our logger (text or JSON, the chosen level).
void GrpcLog(gpr_log_func_args* args) {
  switch (args->severity) {
    case GPR_LOG_SEVERITY_ERROR:
      if (g_starting.load()) {
        spdlog::debug("grpc: {}", args->message);
        break;
      }
      spdlog::warn("grpc: {}", args->message);
      break;
    case GPR_LOG_SEVERITY_INFO:
      spdlog::info("grpc: {}", args->message);
      break;
    default:
      spdlog::debug("grpc: {}", args->message);
  }
}

int Fail(const std::string& line) {
  fmt::print(stderr, "ringmaster-coordinator: {}\n", line);
  return 1;
}

int Run(Flags& flags) {
  CoordinatorConfig& config = flags.config;
  for (auto [name, text, out] :
       {std::make_tuple("--heartbeat-interval", &flags.heartbeat_interval, &config.heartbeat_interval),
        std::make_tuple("--rendezvous-timeout", &flags.rendezvous_timeout, &config.rendezvous_timeout),
        std::make_tuple("--stop-grace-period", &flags.stop_grace_period, &config.stop_grace_period),
        std::make_tuple("--drain-checkpoint-timeout", &flags.drain_checkpoint_timeout,
                        &config.drain_checkpoint_timeout),
        std::make_tuple("--preemption-grace", &flags.preemption_grace, &config.preemption_grace),
        std::make_tuple("--quarantine-window", &flags.quarantine_window, &config.quarantine.window),
        std::make_tuple("--straggler-move-window", &flags.straggler_move_window, &config.stragglers.move_window),
        std::make_tuple("--checkpoint-interval-min", &flags.checkpoint_interval_min,
                        &config.checkpoint_interval.min),
        std::make_tuple("--checkpoint-interval-max", &flags.checkpoint_interval_max,
                        &config.checkpoint_interval.max),
        std::make_tuple("--checkpoint-mtbf-prior", &flags.checkpoint_mtbf_prior, &config.checkpoint_interval.mtbf_prior),
        std::make_tuple("--checkpoint-failure-window", &flags.checkpoint_failure_window,
                        &config.checkpoint_interval.failure_window),
        std::make_tuple("--shutdown-timeout", &flags.shutdown_timeout, &config.shutdown_timeout),
        std::make_tuple("--node-recovery-grace", &flags.node_recovery_grace, &config.node_recovery_grace)}) {
    if (absl::Status s = ringmaster::ParseDurationFlag(name, *text, /*allow_zero=*/false, out); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  if (config.checkpoint_interval.max < config.checkpoint_interval.min) {
    return Fail(absl::StrCat("--checkpoint-interval-max: must be at least --checkpoint-interval-min (",
                             flags.checkpoint_interval_min, "), got ", flags.checkpoint_interval_max));
  }
  if (config.stragglers.factor != 0 && !(config.stragglers.factor > 1)) {
    return Fail(absl::StrCat("--straggler-factor: must be above 1 (or 0: off), got ", config.stragglers.factor));
  }
  config.job_retention.max_age = absl::Seconds(flags.job_retention_days * 86400);
  absl::StatusOr<ringmaster::coordinator::Visibility> visibility =
      ringmaster::coordinator::ParseVisibility(flags.visibility);
  if (!visibility.ok()) return Fail(absl::StrCat("--visibility: ", visibility.status().message()));
  config.visibility = *visibility;
  if (!flags.disk_reserve.empty()) {
    absl::StatusOr<ringmaster::coordinator::DiskReserveOptions> reserve =
        ringmaster::coordinator::ParseDiskReserve(flags.disk_reserve);
    if (!reserve.ok()) return Fail(std::string(reserve.status().message()));
    config.disk_reserve = *reserve;
  }
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server =
      CoordinatorServer::Start(config, ringmaster::Clock::Real());
  if (!server.ok()) return Fail(std::string(server.status().message()));
  g_starting = false;
  spdlog::info("ringmaster-coordinator {} ready: gRPC on port {}, state in {}", ringmaster::kVersion, (*server)->port(),
               config.state_dir);
  int sig = ringmaster::WaitForShutdownSignal(SIGHUP);
  for (; sig == SIGHUP; sig = ringmaster::WaitForShutdownSignal(SIGHUP)) {
    if (absl::Status s = (*server)->ReloadQueues(); !s.ok()) {
      spdlog::error("SIGHUP: the queues in force stay: {}", std::string(s.message()));
    }
  }
  spdlog::info("signal {}: shutting down", sig);
  (*server)->Shutdown();
  server->reset();  // joins what is left and closes the database
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ringmaster::BlockShutdownSignals(SIGHUP);  // before any thread starts; SIGHUP: read the queues file again
  CLI::App app{"ringmaster-coordinator: queues, schedules and supervises training jobs"};
  Flags flags;
  ringmaster::AddCommonFlags(app, &flags.common);
  app.add_option("--listen", flags.config.listen, "gRPC listen address (host:port; port 0: any free port)")
      ->capture_default_str();
  app.add_option("--state-dir", flags.config.state_dir, "SQLite database (coordinator.db) and job logs (logs/)")
      ->capture_default_str();
  ringmaster::AddClearableOption(app, "--metrics-listen", &flags.config.metrics_listen,
                                 "host:port of the Prometheus /metrics endpoint (and /healthz); empty disables it");
  ringmaster::AddClearableOption(app, "--health-listen", &flags.config.health_listen,
                                 "host:port of a plaintext gRPC listener serving only grpc.health.v1.Health, for "
                                 "probes that cannot present TLS (Kubernetes' gRPC probes); empty: none");
  app.add_option("--heartbeat-interval", flags.heartbeat_interval,
                 "How often workers heartbeat; a node is lost after 3 intervals without one")
      ->capture_default_str();
  app.add_option("--rendezvous-timeout", flags.rendezvous_timeout,
                 "Every rank of a generation must join its rendezvous within this time")
      ->capture_default_str();
  app.add_option("--stop-grace-period", flags.stop_grace_period, "Time ranks get between SIGTERM and SIGKILL")
      ->capture_default_str();
  app.add_option("--queues", flags.config.queues_file,
                 "The teams' queues: quotas, borrowing, fair share, members (YAML, docs/operations.md); read again "
                 "on SIGHUP. Default: one queue holding everything");
  app.add_option("--preemption-grace", flags.preemption_grace,
                 "A preempted job that wrote no checkpoint within this time is stopped all the same (it resumes "
                 "from its newest)")
      ->capture_default_str();
  app.add_option("--drain-checkpoint-timeout", flags.drain_checkpoint_timeout,
                 "A drained node's job moves after this long even without the checkpoint it was asked for "
                 "(it then resumes from its newest one)")
      ->capture_default_str();
  app.add_option("--quarantine-jobs", flags.config.quarantine.jobs,
                 "Cordon (quarantine) a node where ranks of this many distinct jobs failed within "
                 "--quarantine-window, until an operator uncordons it; 0: never")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--quarantine-window", flags.quarantine_window,
                 "The window of --quarantine-jobs")
      ->capture_default_str();
  app.add_option("--straggler-factor", flags.config.stragglers.factor,
                 "Flag a rank whose own work per step (step time less communication) is this many times its "
                 "peers' median for --straggler-steps steps (a STRAGGLER event, ringmaster_straggler); 0: off")
      ->capture_default_str();
  app.add_option("--straggler-steps", flags.config.stragglers.steps,
                 "The steps a rank must stay above --straggler-factor to be flagged (and below it to be "
                 "unflagged); 0: off")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--straggler-move-window", flags.straggler_move_window,
                 "A job with restart.move_stragglers moves off a straggler's node at most once in this window, "
                 "and keeps off that node for it")
      ->capture_default_str();
  app.add_option("--checkpoint-interval-min", flags.checkpoint_interval_min,
                 "checkpoint.interval auto (the Young-Daly interval, the default): never more often than this")
      ->capture_default_str();
  app.add_option("--checkpoint-interval-max", flags.checkpoint_interval_max,
                 "checkpoint.interval auto: never less often than this")
      ->capture_default_str();
  app.add_option("--checkpoint-mtbf-prior", flags.checkpoint_mtbf_prior,
                 "checkpoint.interval auto: a job's mean time between failures when neither it nor its nodes "
                 "failed yet")
      ->capture_default_str();
  app.add_option("--checkpoint-failure-window", flags.checkpoint_failure_window,
                 "checkpoint.interval auto: the window of failures on a job's nodes its MTBF estimate counts")
      ->capture_default_str();
  app.add_option("--shutdown-timeout", flags.shutdown_timeout,
                 "On SIGTERM: how long calls in flight (and clients' idle connections) may take to close")
      ->capture_default_str();
  app.add_option("--node-recovery-grace", flags.node_recovery_grace,
                 "After a restart, how long known nodes have to register again before they are lost "
                 "(covers the workers' reconnection backoff)")
      ->capture_default_str();
  app.add_option("--job-retention-days", flags.job_retention_days,
                 "Days a finished job (timeline, checkpoint records, logs) is kept after it ended; 0: no age limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--job-retention-count", flags.config.job_retention.max_count,
                 "Finished jobs kept at most, newest first; -1: no limit")
      ->check(CLI::Range(-1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  // Disk (docs/deploy.md, "The coordinator's disk").
  ringmaster::AddByteSizeOption(app, "--log-quota-per-job", &flags.config.log_quota_per_job,
                                "Bytes of logs kept per job (every rank and generation); beyond it the job's oldest "
                                "lines are dropped and `ringmaster logs` shows how many where they were; 0: no quota",
                                /*allow_zero=*/true);
  app.add_option("--disk-reserve", flags.disk_reserve,
                 "Free space kept on the state directory's filesystem for the database: under it, new log lines "
                 "are refused (RESOURCE_EXHAUSTED to workers) while checkpoint commits and scheduling go on. A size "
                 "(2GiB) or a percentage of the filesystem (5%); 0: none")
      ->default_str(ringmaster::coordinator::DescribeDiskReserve(flags.config.disk_reserve));
  app.add_option("--checkpoint-root", flags.config.checkpoint_root,
                 "Checkpoints of jobs that name no directory (default: <state-dir>/checkpoints)");
  app.add_option("--checkpoint-allowed-roots", flags.config.checkpoint_allowed_roots,
                 "Further directories a job's checkpoint.directory may lie within (comma-separated; absolute)")
      ->delimiter(',');
  app.add_option("--allowed-env", flags.config.allowed_env,
                 "Environment variables a job's spec may set for its trainers, comma-separated: @default (the "
                 "built-in NCCL/CUDA tuning variables, docs/security.md), exact names, or prefixes ending in *. A "
                 "prefix never admits a variable that loads code or names a path (*_PLUGIN, *_INJECTION*, *_FILE, "
                 "*_PATH, *_LIB, *_DIR, *_DIRECTORY, *_PIPE, LD_*, PYTHON*): name such a variable exactly to allow "
                 "it. Extend the default with \"@default,NAME\"; \"\": none")
      ->delimiter(',')
      ->check([](const std::string& entry) {
        absl::StatusOr<ringmaster::EnvPolicy> policy = ringmaster::EnvPolicy::Create({entry});
        return policy.ok() ? std::string() : std::string(policy.status().message());
      })
      ->capture_default_str();
  // Security (docs/security.md): without TLS, --listen must be loopback.
  app.add_option("--tls-ca", flags.config.tls.ca_file, "CA bundle (PEM) that workers' client certificates chain to");
  app.add_option("--tls-cert", flags.config.tls.cert_file, "The coordinator's server certificate (PEM)");
  app.add_option("--tls-key", flags.config.tls.key_file, "Its private key (PEM, mode 0600)");
  app.add_option("--token-file", flags.config.token_file,
                 "Users' bearer tokens, one \"<token or sha256:HEX> <user> [admin]\" per line (mode 0600)");
  app.add_option("--join-token-file", flags.config.join_token_file,
                 "The token workers must present to join (first line; mode 0600)");
  app.add_option("--visibility", flags.visibility,
                 "Who may read a job's description, timeline, logs and checkpoints: team (its owner, the members "
                 "of its queue and admins; `jobs` hides other queues' specs) or open (every user)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s = ringmaster::SetupLoggingFromFlags(flags.common, "coordinator"); !s.ok()) {
    fmt::print(stderr, "ringmaster-coordinator: {}\n", std::string(s.message()));
    return 2;
  }
  gpr_set_log_function(GrpcLog);
  return Run(flags);
}
