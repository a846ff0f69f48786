// ringmaster-worker: the node agent's composition root. It reads the flags,
// builds the worker's parts in dependency order, serves until SIGINT/SIGTERM,
// then stops the ranks (SIGTERM, SIGKILL after the grace period), reports
// their exits, closes the session with the coordinator and exits 0.
// SIGUSR1 drains the node: the coordinator moves its jobs to other nodes
// (each checkpoints first) and places nothing new here (deploy/slurm sends
// it before an allocation ends).
//
//   ringmaster-worker --coordinator HOST:PORT [--cpu-slots N] [--state-dir DIR]
//                     [--listen-address HOST] [--metrics-listen HOST:PORT]
//                     [--trainer PATH] [--heartbeat-interval SECONDS]
//                     [--stop-grace-period SECONDS] [--label KEY=VALUE ...]
//                     [--tls-ca FILE --tls-cert FILE --tls-key FILE] [--join-token-file FILE]
//                     [--job-retention-days DAYS] [--job-retention-count N]
//                     [--run-as ACCOUNT|owner|self [--run-as-map FILE]] [--rank-env NAME[=VALUE] ...]
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cli_flags.h"
#include "common/clock.h"
#include "common/env_policy.h"
#include "common/metrics.h"
#include "common/metrics_http.h"
#include "common/grpc_security.h"
#include "common/signals.h"
#include "common/tls.h"
#include "engine/gpu/gpu_info.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"
#include "worker/agent_server.h"
#include "worker/coordinator_session.h"
#include "worker/log_pusher.h"
#include "worker/job_dir_janitor.h"
#include "worker/job_dirs.h"
#include "worker/log_shipper.h"
#include "worker/node_credential.h"
#include "worker/paths.h"
#include "worker/process_control.h"
#include "worker/process_supervisor.h"
#include "worker/rank_launcher.h"
#include "worker/run_as.h"
#include "worker/worker_metrics.h"

extern char** environ;

namespace ringmaster::worker {
namespace {

struct Flags {
  CommonFlags common;
  std::string coordinator = "127.0.0.1:50051";
  int cpu_slots = 0;
  std::string state_dir = "/var/lib/ringmaster/worker";
  std::string listen_address;
  std::string node_name;
  std::string metrics_listen = "127.0.0.1:0";
  std::string trainer;
  absl::Duration heartbeat_interval = absl::ZeroDuration();  // zero: the coordinator's
  absl::Duration stop_grace_period = absl::Seconds(10);
  absl::Duration state_dump_wait = absl::Seconds(2);
  absl::Duration reconnect_initial = absl::Milliseconds(500);
  absl::Duration reconnect_max = absl::Seconds(30);
  std::vector<std::string> labels;
  // Where jobs' data.path may point (see RankLauncherOptions::data_roots).
  std::vector<std::string> data_roots = {"/usr/share/datasets", "/usr/local/share/ringmaster",
                                         "/var/lib/ringmaster/datasets"};
  TlsFiles tls;
  std::string join_token_file;
  // Finished jobs' directories (<state-dir>/jobs/<job>) kept (JobDirJanitor).
  double job_retention_days = 7;
  int job_retention_count = 200;
  // Which account ranks run as (worker/run_as.h); "": the worker decides.
  std::string run_as;
  std::string run_as_map;
  // The node's variables for every rank (NodeRankEnv).
  std::vector<std::string> rank_env;
  std::vector<std::string> allowed_env = {"*"};
};

SupervisorOptions SupervisorOptionsFromFlags(const Flags& flags) {
  SupervisorOptions options;
  options.state_dump_wait = flags.state_dump_wait;
  return options;
}

int Fail(const std::string& message) {
  spdlog::error("{}", message);
  return 1;
}

// Ranks of other accounts have no CAP_IPC_LOCK: what NCCL over RDMA pins is
// bounded by RLIMIT_MEMLOCK, which they inherit. Its soft limit goes up to
// the hard one (no privilege needed); a hard limit that is not unlimited is
// the runtime's (systemd LimitMEMLOCK=, docker --ulimit memlock=-1).
void RaiseMemlockForRanks() {
  rlimit limit;
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_MEMLOCK, &limit);
  if (limit.rlim_max != RLIM_INFINITY) {
    spdlog::warn("RLIMIT_MEMLOCK is {} bytes: ranks (other accounts, no CAP_IPC_LOCK) cannot pin more for RDMA; "
                 "NCCL over InfiniBand/RoCE needs it unlimited (LimitMEMLOCK=infinity, --ulimit memlock=-1)",
                 static_cast<uint64_t>(limit.rlim_max));
  }
}

// Ranks of other accounts run the trainer: it and every directory above it
// must be open to them (an operator's install is; Bazel's runfiles under a
// 0700 /root are not).
void WarnIfNotExecutableByOthers(const std::string& trainer) {
  std::filesystem::path path(trainer);
  for (std::filesystem::path p = path; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) return;
    const mode_t need = p == path ? (S_IROTH | S_IXOTH) : S_IXOTH;
    if ((st.st_mode & need) != need) {
      spdlog::warn("{} is not {} by other accounts: ranks running as one may fail to start (the trainer, its "
                   "libraries and the directories above them must be readable and executable by the run accounts)",
                   p.string(), p == path ? "readable and executable" : "searchable");
      return;
    }
  }
}

// The state directory 0700, or 0711 when ranks run as other accounts: then
// everything in it but ranks/ (0711) and the socket is made the worker's
// alone (what an older worker left group- or world-readable included), and
// ranks reach only the socket and their own job's directory.
absl::Status RestrictStateDir(const std::string& state_dir, bool other_accounts) {
  const mode_t mode = other_accounts ? 0711 : 0700;
  if (chmod(state_dir.c_str(), mode) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot set the mode of --state-dir ", state_dir, " (chmod ",
                                                      other_accounts ? "711" : "700", "): ", std::strerror(errno)));
  }
  const std::string ranks = RanksDir(state_dir);
  if (mkdir(ranks.c_str(), mode) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create ", ranks, ": ", std::strerror(errno)));
  }
  if (chmod(ranks.c_str(), mode) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot set the mode of ", ranks, ": ", std::strerror(errno)));
  }
  if (!other_accounts) return absl::OkStatus();
  std::error_code ec;
  for (const std::filesystem::directory_entry& entry : std::filesystem::directory_iterator(state_dir, ec)) {
    const std::string path = entry.path().string();
    if (path == ranks || path == AgentSocketPath(state_dir) || entry.is_symlink(ec)) continue;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || (st.st_mode & 077) == 0) continue;
    if (chmod(path.c_str(), st.st_mode & 07700) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make ", path, " the worker's alone (chmod go-rwx): ", std::strerror(errno)));
    }
  }
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot list --state-dir ", state_dir, ": ", ec.message()));
  return absl::OkStatus();
}

std::string Hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string SelfExe() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.string();
}

// "host:port" / "[v6]:port" -> host, port. `port` is -1 when absent.
absl::Status SplitHostPort(const std::string& address, std::string* host, int* port) {
  *port = -1;
  std::string rest = address;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
    *host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (rest.empty()) return absl::OkStatus();
    if (rest.front() != ':') return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
    rest = rest.substr(1);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || rest.find(':') != colon) {  // no port, or a bare IPv6 address
      *host = rest;
      return absl::OkStatus();
    }
    *host = rest.substr(0, colon);
    rest = rest.substr(colon + 1);
  }
  if (!absl::SimpleAtoi(rest, port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in ", address));
  }
  return absl::OkStatus();
}

// One worker per state directory: an flock held for the life of the process.
absl::Status LockStateDir(const std::string& state_dir) {
  const std::string path = state_dir + "/worker.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return absl::FailedPreconditionError(absl::StrCat("cannot open ", path));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("another worker uses ", state_dir, " (", path, " is locked)"));
  }
  return absl::OkStatus();  // the descriptor stays open on purpose
}

absl::StatusOr<v1::NodeInfo> DescribeNode(const Flags& flags, const std::string& hostname, const std::string& address) {
  v1::NodeInfo node;
  node.set_hostname(hostname);
  node.set_address(address);
  node.set_worker_version(kVersion);
  absl::StatusOr<engine::gpu::GpuDiscovery> discovery = engine::gpu::DiscoverGpus();
  if (!discovery.ok()) return discovery.status();
  for (const engine::gpu::GpuInfo& gpu : discovery->gpus) {
    spdlog::info("GPU {}", engine::gpu::DescribeGpu(gpu));
    v1::GpuInfo* out = node.add_gpus();
    out->set_uuid(gpu.uuid);
    out->set_name(gpu.name);
    out->set_memory_bytes(static_cast<int64_t>(gpu.total_memory_bytes));
    out->set_index(gpu.index);
    out->set_pci_bus_id(gpu.pci_bus_id);
    out->set_compute_capability_major(gpu.compute_capability_major);
    out->set_compute_capability_minor(gpu.compute_capability_minor);
  }
  int cpu_slots = flags.cpu_slots;
  if (discovery->gpus.empty()) {
    if (cpu_slots == 0) cpu_slots = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    spdlog::info("no GPUs ({}): offering {} CPU slot(s)", discovery->reason, cpu_slots);
  }
  node.set_cpu_slots(cpu_slots);
  for (const std::string& label : flags.labels) {
    size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--label ", label, ": expected KEY=VALUE"));
    }
    (*node.mutable_labels())[label.substr(0, eq)] = label.substr(eq + 1);
  }
  return node;
}

int Run(const Flags& flags) {
  std::error_code ec;
  const std::string state_dir = std::filesystem::absolute(flags.state_dir, ec).lexically_normal().string();
  // Which account ranks run as, decided before anything is made: with other
  // accounts, everything the worker makes is its own alone unless it says
  // otherwise (umask 077; the ranks inherit it too).
  absl::StatusOr<RunAsPolicy> run_as = ResolveRunAs(flags.run_as, flags.run_as_map, geteuid(),
                                                    /*local_mode=*/!flags.tls.any());
  if (!run_as.ok()) return Fail(std::string(run_as.status().message()));
  const bool other_accounts = run_as->drops_privileges();
  if (other_accounts) {
    umask(077);
    RaiseMemlockForRanks();
  }
  std::filesystem::create_directories(state_dir, ec);
  if (ec) return Fail(absl::StrCat("cannot create --state-dir ", state_dir, ": ", ec.message()));
  // The trainers' socket and their jobs' directories live here: only this
  // user may list it; ranks of other accounts may pass through (0711).
  if (absl::Status s = RestrictStateDir(state_dir, other_accounts); !s.ok()) return Fail(std::string(s.message()));
  if (absl::Status s = LockStateDir(state_dir); !s.ok()) return Fail(std::string(s.message()));
  std::unique_ptr<TlsMaterial> tls;
  if (flags.tls.any()) {
    absl::StatusOr<TlsMaterial> loaded = LoadTlsMaterial(flags.tls, /*require_identity=*/true);
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    tls = std::make_unique<TlsMaterial>(*std::move(loaded));
  } else {
    std::string host;
    int port;
    if (SplitHostPort(flags.coordinator, &host, &port).ok() && !absl::StartsWith(flags.coordinator, "unix:") &&
        !IsLoopbackHost(host)) {
      return Fail(absl::StrCat("--coordinator ", flags.coordinator,
                               " is not a loopback address: use TLS (--tls-ca, --tls-cert, --tls-key; see "
                               "docs/security.md)"));
    }
  }
  std::string join_token;
  if (!flags.join_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadSecretFile(flags.join_token_file, "--join-token-file");
    if (!token.ok()) return Fail(std::string(token.status().message()));
    join_token = *std::move(token);
  }
  const char* path_env = std::getenv("PATH");
  absl::StatusOr<std::string> trainer = FindTrainer(flags.trainer, SelfExe(), path_env ? path_env : "");
  if (!trainer.ok()) return Fail(std::string(trainer.status().message()));

  const std::string hostname = flags.node_name.empty() ? Hostname() : flags.node_name;
  const std::string address = flags.listen_address.empty() ? hostname : flags.listen_address;
  std::string advertise_host;
  int advertise_port;
  if (absl::Status s = SplitHostPort(address, &advertise_host, &advertise_port); !s.ok()) {
    return Fail(absl::StrCat("--listen-address: ", s.message()));
  }
  absl::StatusOr<v1::NodeInfo> node = DescribeNode(flags, hostname, address);
  if (!node.ok()) return Fail(node.status().ToString());

  MetricsRegistry registry;
  absl::StatusOr<std::unique_ptr<WorkerMetrics>> metrics = WorkerMetrics::Create(&registry, hostname);
  if (!metrics.ok()) return Fail(metrics.status().ToString());
  (*metrics)->SetCapacity(node->gpus_size(), node->cpu_slots());
  std::string metrics_host;
  int metrics_port;
  if (absl::Status s = SplitHostPort(flags.metrics_listen, &metrics_host, &metrics_port); !s.ok()) {
    return Fail(absl::StrCat("--metrics-listen: ", s.message()));
  }
  MetricsHttpServer metrics_server(&registry);
  if (absl::Status s = metrics_server.Start(metrics_host, std::max(metrics_port, 0)); !s.ok()) {
    return Fail(s.ToString());
  }
  spdlog::info("metrics on http://{}/metrics", metrics_server.address());

  BackoffOptions backoff;
  backoff.initial = flags.reconnect_initial;
  backoff.max = flags.reconnect_max;
  // Which node this is: issued by the coordinator, sent with every call.
  NodeCredential credential(NodeCredentialPath(state_dir));
  if (absl::Status s = credential.Load(); !s.ok()) return Fail(std::string(s.message()));
  std::shared_ptr<grpc::Channel> channel =
      CoordinatorChannel(flags.coordinator, backoff, tls.get(), join_token, &credential);
  const std::string socket = AgentSocketPath(state_dir);

  RealProcessControl control;
  LogShipper shipper(Clock::Real());
  std::unique_ptr<CoordinatorSession> session;  // set before any rank can start
  SupervisorOptions supervisor_options = SupervisorOptionsFromFlags(flags);
  supervisor_options.require_run_as = other_accounts;
  ProcessSupervisor supervisor(&control, Clock::Real(), [&](const RankExit& exit) {
    shipper.Finish(exit.job_id, exit.generation, exit.global_rank);
    (*metrics)->RankExited(exit.job_id, exit.generation, exit.global_rank);
    if (session != nullptr) session->ReportExit(exit);
  }, supervisor_options);
  RankLauncherOptions launcher_options;
  launcher_options.state_dir = state_dir;
  launcher_options.trainer_path = *trainer;
  launcher_options.agent_socket = socket;
  launcher_options.advertise_host = advertise_host;
  for (const std::string& root : flags.data_roots) {
    if (root.empty() || root[0] != '/') return Fail(absl::StrCat("--data-roots: ", root, " is not an absolute path"));
    launcher_options.data_roots.push_back(std::filesystem::path(root).lexically_normal().string());
  }
  std::vector<std::string> worker_env;
  for (char** e = environ; *e != nullptr; ++e) worker_env.emplace_back(*e);
  absl::StatusOr<std::vector<std::string>> node_env = NodeRankEnv(flags.rank_env, worker_env);
  if (!node_env.ok()) return Fail(std::string(node_env.status().message()));
  launcher_options.node_env = *std::move(node_env);
  launcher_options.allowed_env = flags.allowed_env;
  launcher_options.run_as = *run_as;
  launcher_options.default_grace = flags.stop_grace_period;
  RankLauncher launcher(&supervisor, &shipper, launcher_options);

  CoordinatorSessionOptions session_options;
  session_options.node = *node;
  session_options.node_id_path = NodeIdPath(state_dir);
  session_options.credential = &credential;
  session_options.heartbeat_interval = flags.heartbeat_interval;
  session_options.backoff = backoff;
  session = std::make_unique<CoordinatorSession>(channel, &launcher, &supervisor, metrics->get(), session_options);

  AgentServer agent(
      &supervisor, metrics->get(), [&](const v1::RankProgress& progress) { session->ReportProgress(progress); },
      channel, AgentServerOptions{socket, static_cast<mode_t>(other_accounts ? 0666 : 0600)});
  if (absl::Status s = agent.Start(); !s.ok()) return Fail(s.ToString());
  LogPusher pusher(
      channel, &shipper, [&] { return session->node_id(); }, backoff);
  (*metrics)->SetRanksRunningSource([&] { return static_cast<double>(supervisor.RunningCount()); });
  (*metrics)->SetLogLinesDroppedSource([&] { return static_cast<double>(shipper.dropped_lines()); });

  spdlog::info("worker {} on {} ({} GPU(s), {} CPU slot(s)); trainer {}; state in {}; coordinator {}", kVersion,
               address, node->gpus_size(), node->cpu_slots(), *trainer, state_dir, flags.coordinator);
  spdlog::info("ranks run as {}", run_as->Describe());
  if (!other_accounts && flags.tls.any()) {
    spdlog::warn("ranks run as the worker's own account (--run-as self) and can read its key, join token and state "
                 "directory; --run-as ACCOUNT or --run-as owner runs them unprivileged (docs/security.md)");
  } else if (!other_accounts && geteuid() == 0) {
    spdlog::warn("ranks run as root, with the worker's privileges (local mode); --run-as ACCOUNT or --run-as owner "
                 "runs them unprivileged (docs/security.md)");
  }
  if (other_accounts) WarnIfNotExecutableByOthers(*trainer);
  const JobRetention retention{absl::Seconds(flags.job_retention_days * 86400), flags.job_retention_count};
  auto active_jobs = [&] {
    std::set<std::string> active;
    for (const RunningRankInfo& rank : supervisor.Running()) active.insert(rank.job_id);
    return active;
  };
  JobDirJanitor janitor(JobsDir(state_dir), retention, active_jobs);
  // The jobs' own directories, removed as their owners (worker/job_dirs.h).
  JobDirJanitor ranks_janitor(RanksDir(state_dir), retention, active_jobs, absl::Minutes(10), RemoveOwnedTree);
  shipper.Start();
  pusher.Start();
  session->Start();
  janitor.Start();
  ranks_janitor.Start();

  int sig = 0;
  while ((sig = WaitForShutdownSignal(SIGUSR1)) == SIGUSR1) {
    // Before a Slurm allocation ends (sbatch --signal=USR1@300), or by hand:
    // the coordinator moves this node's jobs elsewhere and places none here.
    spdlog::info("SIGUSR1: draining this node: its jobs checkpoint and move to other nodes");
    session->RequestDrain("the worker got SIGUSR1 (e.g. its Slurm allocation ends soon)");
  }
  spdlog::info("signal {}: stopping {} rank(s), grace {}", sig, supervisor.RunningCount(),
               absl::FormatDuration(flags.stop_grace_period));
  supervisor.Shutdown(flags.stop_grace_period);  // every exit reported to the session
  janitor.Stop();
  ranks_janitor.Stop();
  agent.Stop();
  shipper.Close();
  pusher.Stop(absl::Seconds(2));
  session->Stop(absl::Seconds(5));
  (*metrics)->SetRanksRunningSource(nullptr);
  (*metrics)->SetLogLinesDroppedSource(nullptr);
  metrics_server.Stop();
  spdlog::info("worker stopped");
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
  ringmaster::worker::Flags flags;
  ringmaster::AddCommonFlags(app, &flags.common);
  app.add_option("--coordinator", flags.coordinator, "Coordinator address (host:port)")->capture_default_str();
  app.add_option("--cpu-slots", flags.cpu_slots, "CPU slots to offer (default: none on a GPU node, else one per CPU)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--state-dir", flags.state_dir, "Rank logs, work directories and the trainers' socket")
      ->capture_default_str();
  app.add_option("--node-name", flags.node_name,
                 "The node's name at the coordinator (default: the hostname; set it to run several workers on "
                 "one machine)");
  app.add_option("--listen-address", flags.listen_address,
                 "Address the node's ranks are reachable at, advertised to the coordinator (default: the hostname)");
  app.add_option("--metrics-listen", flags.metrics_listen, "host:port of /metrics (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--trainer", flags.trainer, "ringmaster-trainer binary (default: beside this binary, else on PATH)");
  ringmaster::AddDurationOption(app, "--heartbeat-interval", &flags.heartbeat_interval,
                    "Between heartbeats (0: the coordinator's interval)", /*allow_zero=*/true);
  ringmaster::AddDurationOption(app, "--stop-grace-period", &flags.stop_grace_period,
                    "Ranks get this long between SIGTERM and SIGKILL at shutdown and for stop orders without one",
                    /*allow_zero=*/true);
  ringmaster::AddDurationOption(app, "--state-dump-wait", &flags.state_dump_wait,
                    "Between SIGUSR1 (the trainer writes its step, phase and stacks to its log) and SIGTERM when a "
                    "rank is stopped; 0: no state dump",
                    /*allow_zero=*/true);
  ringmaster::AddDurationOption(app, "--reconnect-initial-backoff", &flags.reconnect_initial,
                    "Before the first reconnection attempt", /*allow_zero=*/false);
  ringmaster::AddDurationOption(app, "--reconnect-max-backoff", &flags.reconnect_max,
                    "Longest wait between reconnection attempts", /*allow_zero=*/false);
  app.add_option("--label", flags.labels, "Node label KEY=VALUE for node selectors (repeatable)");
  app.add_option("--job-retention-days", flags.job_retention_days,
                 "Days a finished job's directory (logs, working directories) is kept under <state-dir>/jobs; "
                 "0: no age limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--job-retention-count", flags.job_retention_count,
                 "Finished jobs' directories kept at most, newest first; -1: no limit")
      ->check(CLI::Range(-1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  app.add_option("--data-roots", flags.data_roots,
                 "Directories a job's data.path must lie in (comma-separated; a job reading elsewhere is refused)")
      ->delimiter(',')
      ->capture_default_str();
  // Ranks never run with the worker's privileges (docs/security.md).
  app.add_option("--run-as", flags.run_as,
                 "Unix account the ranks run as: ACCOUNT (a name, UID or UID:GID; never root) for every job; owner "
                 "for each job's owner's account, mapped by --run-as-map; self for the worker's own. Default: self "
                 "in local mode; with TLS (a cluster) it must be given, root or not (ranks of the worker's own "
                 "account can read its key and join token). Ranks get the account's own groups, no capability and "
                 "no_new_privs");
  app.add_option("--run-as-map", flags.run_as_map,
                 "With --run-as owner: file of \"user account\" lines mapping the coordinator's users to Unix "
                 "accounts (not writable by group or others); a job whose owner is not in it is refused");
  app.add_option("--allowed-env", flags.allowed_env,
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
  app.add_option("--rank-env", flags.rank_env,
                 "A variable for every rank, beyond the minimal environment (ranks never inherit the worker's): "
                 "NAME=VALUE, NAME (the worker's own value) or PREFIX* (the worker's variables starting with "
                 "PREFIX, e.g. NCCL_*); repeatable. A job's spec env overrides it");
  // Security (docs/security.md): without TLS, --coordinator must be loopback.
  app.add_option("--tls-ca", flags.tls.ca_file, "CA bundle (PEM) the coordinator's certificate must chain to");
  app.add_option("--tls-cert", flags.tls.cert_file, "This worker's client certificate (PEM)");
  app.add_option("--tls-key", flags.tls.key_file, "Its private key (PEM, mode 0600)");
  app.add_option("--join-token-file", flags.join_token_file,
                 "File holding the coordinator's join token (first line; mode 0600)");
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s = ringmaster::SetupLoggingFromFlags(flags.common, "worker"); !s.ok()) {
    fmt::print(stderr, "ringmaster-worker: {}\n", std::string(s.message()));
    return 2;
  }
  spdlog::flush_on(spdlog::level::info);  // a daemon's log file is read while it runs
  return ringmaster::worker::Run(flags);
}
