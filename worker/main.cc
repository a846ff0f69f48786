// ringmaster-worker: parses the flags and the environment into a
// WorkerConfig and runs the Worker (worker/worker.h, the composition root)
// until SIGINT/SIGTERM, then shuts it down (the ranks stopped: SIGTERM,
// SIGKILL after the grace period; their exits reported; the session closed)
// and exits 0. SIGUSR1 drains the node: the coordinator moves its jobs to
// other nodes (each checkpoints first) and places nothing new here
// (deploy/slurm sends it before an allocation ends). Exit 1 when the worker
// cannot start (the reason logged), 2 for bad flags.
//
//   ringmaster-worker --coordinator HOST:PORT [--cpu-slots N] [--state-dir DIR]
//                     [--listen-address HOST] [--metrics-listen HOST:PORT]
//                     [--trainer PATH] [--python-sdk DIR] [--heartbeat-interval SECONDS]
//                     [--stop-grace-period SECONDS] [--label KEY=VALUE ...]
//                     [--tls-ca FILE --tls-cert FILE --tls-key FILE] [--join-token-file FILE]
//                     [--job-retention-days DAYS] [--job-retention-count N]
//                     [--run-as ACCOUNT|owner|self [--run-as-map FILE]] [--rank-env NAME[=VALUE] ...]
#include <signal.h>

#include <limits>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "common/cli_flags.h"
#include "common/clock.h"
#include "common/env_policy.h"
#include "common/signals.h"
#include "spdlog/spdlog.h"
#include "worker/worker.h"

extern char** environ;

namespace ringmaster::worker {
namespace {

int Run(const WorkerConfig& config) {
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Start(config, Clock::Real());
  if (!worker.ok()) {
    spdlog::error("{}", std::string(worker.status().message()));
    return 1;
  }
  int sig = 0;
  while ((sig = WaitForShutdownSignal(SIGUSR1)) == SIGUSR1) {
    // Before a Slurm allocation ends (sbatch --signal=USR1@300), or by hand:
    // the coordinator moves this node's jobs elsewhere and places none here.
    spdlog::info("SIGUSR1: draining this node: its jobs checkpoint and move to other nodes");
    (*worker)->RequestDrain("the worker got SIGUSR1 (e.g. its Slurm allocation ends soon)");
  }
  spdlog::info("signal {}: shutting down", sig);
  (*worker)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace ringmaster::worker

int main(int argc, char** argv) {
  ringmaster::BlockShutdownSignals(SIGUSR1);  // before any thread starts; SIGUSR1: drain the node
  CLI::App app{"ringmaster-worker: runs the trainers of this node for the coordinator"};
  app.footer(
      "Signals: SIGTERM/SIGINT stop the ranks and the worker. SIGUSR1 drains the node: the coordinator has each "
      "job here checkpoint and move to other nodes, and places nothing new here until a new worker registers it "
      "(or `ringmaster nodes uncordon`).\nExample: ringmaster-worker --coordinator coord:7070 --state-dir "
      "/var/lib/ringmaster/worker");
  ringmaster::CommonFlags common;
  ringmaster::worker::WorkerConfig config;
  ringmaster::AddCommonFlags(app, &common);
  app.add_option("--coordinator", config.coordinator, "Coordinator address (host:port)")->capture_default_str();
  app.add_option("--cpu-slots", config.cpu_slots, "CPU slots to offer (default: none on a GPU node, else one per CPU)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--state-dir", config.state_dir, "Rank logs, work directories and the trainers' socket")
      ->capture_default_str();
  app.add_option("--node-name", config.node_name,
                 "The node's name at the coordinator (default: the hostname; set it to run several workers on "
                 "one machine)");
  app.add_option("--listen-address", config.listen_address,
                 "Address the node's ranks are reachable at, advertised to the coordinator (default: the hostname)");
  ringmaster::AddClearableOption(app, "--metrics-listen", &config.metrics_listen,
                                 "host:port of /metrics (port 0: any free port; empty disables it)");
  app.add_option("--trainer", config.trainer, "ringmaster-trainer binary (default: beside this binary, else on PATH)");
  app.add_option("--python-sdk", config.python_sdk,
                 "Directory holding the Python SDK's ringmaster package, put first on program jobs' PYTHONPATH "
                 "(default: python/ beside this binary, else ../python/sdk, the bazel-bin layout)");
  ringmaster::AddDurationOption(app, "--heartbeat-interval", &config.heartbeat_interval,
                    "Between heartbeats (0: the coordinator's interval)", /*allow_zero=*/true);
  ringmaster::AddDurationOption(app, "--stop-grace-period", &config.stop_grace_period,
                    "Ranks get this long between SIGTERM and SIGKILL at shutdown and for stop orders without one",
                    /*allow_zero=*/true);
  ringmaster::AddDurationOption(app, "--state-dump-wait", &config.state_dump_wait,
                    "Between SIGUSR1 (the trainer writes its step, phase and stacks to its log) and SIGTERM when a "
                    "rank is stopped; 0: no state dump",
                    /*allow_zero=*/true);
  ringmaster::AddDurationOption(app, "--reconnect-initial-backoff", &config.reconnect_initial,
                    "Before the first reconnection attempt", /*allow_zero=*/false);
  ringmaster::AddDurationOption(app, "--reconnect-max-backoff", &config.reconnect_max,
                    "Longest wait between reconnection attempts", /*allow_zero=*/false);
  app.add_option("--label", config.labels, "Node label KEY=VALUE for node selectors (repeatable)");
  app.add_option("--job-retention-days", config.job_retention_days,
                 "Days a finished job's directory (logs, working directories) is kept under <state-dir>/jobs; "
                 "0: no age limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--job-retention-count", config.job_retention_count,
                 "Finished jobs' directories kept at most, newest first; -1: no limit")
      ->check(CLI::Range(-1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  app.add_option("--data-roots", config.data_roots,
                 "Directories a job's data.path must lie in (comma-separated; a job reading elsewhere is refused)")
      ->delimiter(',')
      ->capture_default_str();
  // Health checks (worker/README.md, "Health checks"): the node is NOT_READY while one fails.
  app.add_option("--health-min-free-mb", config.health_min_free_mb,
                 "Free space (MiB) the state directory and each --health-disk must have; 0: not checked")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--health-disk", config.health_disks,
                 "Another file system whose free space is checked, e.g. the checkpoint root (repeatable)");
  app.add_flag("--require-data-roots", config.require_data_roots,
               "The node is NOT_READY while a --data-roots directory is missing");
  app.add_option("--health-check", config.health_checks,
                 "Operator's check script (absolute path, repeatable): a non-zero exit makes the node NOT_READY, "
                 "its first output line the reason")
      ->check(CLI::ExistingFile);
  ringmaster::AddDurationOption(app, "--health-check-timeout", &config.health_check_timeout,
                                "A --health-check script that runs longer fails (and is killed)", /*allow_zero=*/false);
  app.add_flag("--health-gpu,!--no-health-gpu", config.health_gpu,
               "On a node with GPUs, check them through NVML each --health-interval: count, XID errors, "
               "uncorrected ECC errors, NVLinks down (skipped where the driver's libnvidia-ml cannot load). On by "
               "default; --health-gpu=false or --no-health-gpu turns it off");
  ringmaster::AddDurationOption(app, "--health-interval", &config.health_interval,
                                "How often the health checks run (also before each placement: free space, data "
                                "roots, GPU count)",
                                /*allow_zero=*/false);
  // Ranks never run with the worker's privileges (docs/security.md).
  app.add_option("--run-as", config.run_as,
                 "Unix account the ranks run as: ACCOUNT (a name, UID or UID:GID; never root) for every job; owner "
                 "for each job's owner's account, mapped by --run-as-map; self for the worker's own. Default: self "
                 "in local mode; with TLS (a cluster) it must be given, root or not (ranks of the worker's own "
                 "account can read its key and join token). Ranks get the account's own groups, no capability and "
                 "no_new_privs");
  app.add_option("--run-as-map", config.run_as_map,
                 "With --run-as owner: file of \"user account\" lines mapping the coordinator's users to Unix "
                 "accounts (not writable by group or others); a job whose owner is not in it is refused");
  app.add_option("--allowed-env", config.allowed_env,
                 "The job env names this node lets reach a trainer, checked again before each start (the "
                 "coordinator's --allowed-env checked them at submission), comma-separated: @default (the built-in "
                 "NCCL/CUDA tuning variables), exact names, or prefixes ending in *. A prefix never admits a "
                 "variable that loads code or names a path (*_PLUGIN, *_INJECTION*, *_FILE, *_PATH, LD_*, "
                 "PYTHON*, ...): name such a variable exactly here too. \"*\": whatever the coordinator admitted "
                 "but those")
      ->delimiter(',')
      ->check([](const std::string& entry) {
        absl::StatusOr<ringmaster::EnvPolicy> policy = ringmaster::EnvPolicy::Create({entry}, "worker");
        return policy.ok() ? std::string() : std::string(policy.status().message());
      })
      ->capture_default_str();
  app.add_option("--rank-env", config.rank_env,
                 "A variable for every rank, beyond the minimal environment (ranks never inherit the worker's): "
                 "NAME=VALUE, NAME (the worker's own value) or PREFIX* (the worker's variables starting with "
                 "PREFIX, e.g. NCCL_*); repeatable. A job's spec env overrides it");
  // Security (docs/security.md): without TLS, --coordinator must be loopback.
  app.add_option("--tls-ca", config.tls.ca_file, "CA bundle (PEM) the coordinator's certificate must chain to");
  app.add_option("--tls-cert", config.tls.cert_file, "This worker's client certificate (PEM)");
  app.add_option("--tls-key", config.tls.key_file, "Its private key (PEM, mode 0600)");
  app.add_option("--join-token-file", config.join_token_file,
                 "File holding the coordinator's join token (first line; mode 0600)");
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s = ringmaster::SetupLoggingFromFlags(common, "worker"); !s.ok()) {
    fmt::print(stderr, "ringmaster-worker: {}\n", std::string(s.message()));
    return 2;
  }
  spdlog::flush_on(spdlog::level::info);  // a daemon's log file is read while it runs
  for (char** e = environ; *e != nullptr; ++e) config.environment.emplace_back(*e);
  return ringmaster::worker::Run(config);
}
