// ringmaster: the command-line client of the coordinator (composition root).
//
// Reads the flags and the environment (here only), builds the channel to the
// coordinator and runs one command (client/commands.h,
// client/local_cluster.h). Exit codes are in client/cli.h; every failure is
// one line on stderr.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/time/time.h"
#include "client/cli.h"
#include "client/commands.h"
#include "client/completion.h"
#include "client/connection.h"
#include "client/local_cluster.h"
#include "client/plan_command.h"
#include "common/cli_flags.h"
#include "engine/plan/plan.h"
#include "grpc/support/log.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace {

using namespace ringmaster::client;

constexpr int kMaxInt = std::numeric_limits<int>::max();

// gRPC's own log lines go to our logger at debug level, so that a refused
// connection is our one line, not a page of gRPC internals.
void ForwardGrpcLog(gpr_log_func_args* args) { spdlog::debug("grpc {}:{}: {}", args->file, args->line, args->message); }

std::string Getenv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string DefaultStateDir() {
  if (std::string xdg = Getenv("XDG_STATE_HOME"); !xdg.empty()) return xdg + "/ringmaster/local";
  std::string home = Getenv("HOME");
  return (home.empty() ? std::string("/tmp") : home) + "/.local/state/ringmaster/local";
}

std::string SelfExe() {
  std::error_code ec;
  std::filesystem::path path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : path.string();
}

// The user named in the CANCELLED event.
std::string UserName() {
  std::string user = Getenv("USER");
  return user.empty() ? std::string("unknown user") : user;
}

// -o/--output: table, wide, json or yaml (checked by the option).
OutputFormat ParseOutputFormat(const std::string& name) {
  if (name == "wide") return OutputFormat::kWide;
  if (name == "json") return OutputFormat::kJson;
  if (name == "yaml") return OutputFormat::kYaml;
  if (name == "csv") return OutputFormat::kCsv;
  return OutputFormat::kTable;
}

// The check of a duration flag (--timeout 20m, --since 1h): "" when `text`
// is a positive absl::ParseDuration duration, else why not.
std::string CheckPositiveDuration(const std::string& text) {
  absl::Duration d;
  return absl::ParseDuration(text, &d) && d > absl::ZeroDuration()
             ? std::string()
             : "a positive duration such as 90s, 10m or 1h is expected, got \"" + text + "\"";
}

// What `ringmaster completion` completes flag values and arguments to.
CompletionOptions CompletionValues() {
  CompletionOptions options;
  const std::vector<std::string> formats = {"table", "wide", "json", "yaml", "csv"};
  options.words = {
      {"-o", formats},
      {"--output", formats},
      {"--by", {"user", "queue", "job"}},
      {"--state", {"queued", "placed", "starting", "running", "restarting", "succeeded", "failed", "cancelled"}},
      {"--gpu", ringmaster::engine::plan::DeviceNames()},
      {"--log-level", {"trace", "debug", "info", "warn", "error", "critical", "off"}},
      {"--log-format", {"text", "json"}},
      {"shell", {"bash", "zsh"}},
  };
  options.files = {"--tls-ca", "--token-file", "--log-file", "--state-dir", "--bin-dir", "file"};
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringmaster: submit, watch and cancel training jobs"};
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("ringmaster: ") + e.what() + " (see --help)\n";
  });
  ringmaster::CommonFlags common;
  common.log_level = "warn";
  ringmaster::AddCommonFlags(app, &common);
  GlobalOptions global;
  std::string output = "table";
  app.add_option("--coordinator", global.coordinator, "Coordinator address (host:port, unix:PATH)")
      ->envname("RINGMASTER_COORDINATOR")
      ->capture_default_str();
  ConnectionOptions connection;
  app.add_option("--tls-ca", connection.tls_ca, "CA (PEM) the coordinator's certificate must chain to: use TLS")
      ->envname("RINGMASTER_TLS_CA");
  app.add_option("--token-file", connection.token_file,
                 "File holding your bearer token (default: ~/.config/ringmaster/token, if it exists)")
      ->envname("RINGMASTER_TOKEN_FILE");
  app.add_option("-o,--output", output,
                 "Output format: table, wide (more columns where a command has them), json (one line per "
                 "response), yaml (one document per response) or csv (usage's table as CSV; other commands "
                 "print their table)")
      ->check(CLI::IsMember({"table", "wide", "json", "yaml", "csv"}))
      ->capture_default_str();
  app.require_subcommand(0, 1);  // none: our own message below
  app.fallthrough();  // global flags may follow the command

  SubmitOptions submit;
  CLI::App* submit_cmd = app.add_subcommand("submit", "Submit a job spec (YAML or JSON)");
  submit_cmd
      ->add_option("file", submit.file,
                   "Job spec file (.yaml, .yml or .json), or - to read it from standard input (JSON when it starts "
                   "with '{', else YAML; named \"stdin\" unless it sets name)")
      ->required();
  submit_cmd->add_option("--set", submit.overrides, "Override a field: key.path=value (repeatable)")
      ->allow_extra_args(false);
  CLI::Option* wait = submit_cmd->add_flag("--wait", submit.wait, "Wait until the job ends; non-zero exit unless it succeeded");
  CLI::Option* follow =
      submit_cmd->add_flag("--follow", submit.follow, "Like --wait, showing progress and events");
  wait->excludes(follow);
  submit_cmd->add_flag("--skip-local-validation", submit.skip_local_validation,
                       "Send the spec unchecked: only the coordinator validates it");
  submit_cmd->add_option("--request-id", submit.request_id, "Idempotency key (a retried submit returns the same job)");
  submit_cmd->add_option("--gpu", submit.gpu, "Device type the fit check plans for (default: from resources.device)")
      ->check(CLI::IsMember(ringmaster::engine::plan::DeviceNames(), CLI::ignore_case));
  submit_cmd->add_flag("--strict", submit.strict, "Refuse a spec the plan says does not fit (default: warn)");
  submit_cmd->footer("Example: ringmaster submit examples/gpt_text.yaml --set training.steps=2000 --follow\n"
                     "         cat job.json | ringmaster submit - --wait");

  JobsOptions jobs;
  CLI::App* jobs_cmd = app.add_subcommand("jobs", "List jobs, newest first");
  jobs_cmd->add_option("--state", jobs.states, "Only jobs in this state (repeatable): queued, running, ...")
      ->allow_extra_args(false);
  jobs_cmd->add_option("-l,--selector", jobs.labels,
                       "Only jobs with these labels: key=value, or k1=v1,k2=v2 (repeatable; all must match)")
      ->allow_extra_args(false);
  jobs_cmd->add_option("--limit", jobs.limit, "Show at most the N newest jobs (0: all)")
      ->check(CLI::Range(0, kMaxInt))
      ->capture_default_str();
  jobs_cmd->footer("Example: ringmaster jobs --state running -l team=nlp -o wide");

  std::string describe_job;
  CLI::App* describe_cmd = app.add_subcommand("describe",
                                              "Show a job: its spec, every setting with its value and source "
                                              "(spec, --set, default), placement and timeline");
  describe_cmd->add_option("job", describe_job, "Job id")->required();
  describe_cmd->footer("Example: ringmaster describe j-42 -o yaml");

  std::string attach_job;
  CLI::App* attach_cmd = app.add_subcommand(
      "attach", "Follow a job to its end as submit --follow shows it (exit 3 if it fails or is cancelled)");
  attach_cmd->add_option("job", attach_job, "Job id")->required();
  attach_cmd->footer("Example: ringmaster attach j-42");

  LogsOptions logs;
  int logs_rank = -1;
  CLI::App* logs_cmd = app.add_subcommand("logs", "Print a job's logs, each line prefixed [rank N]");
  logs_cmd->add_option("job", logs.job_id, "Job id")->required();
  logs_cmd->add_flag("-f,--follow", logs.follow, "Keep printing new lines until the job ends");
  logs_cmd->add_option("--rank", logs_rank, "Only this global rank")->check(CLI::Range(0, kMaxInt));
  logs_cmd->add_option("--tail", logs.tail_lines, "Start with at most N stored lines per rank (0: all)")
      ->check(CLI::Range(0, kMaxInt));
  std::string logs_since;
  logs_cmd->add_option("--since", logs_since, "Only lines newer than this: 30s, 10m, 1h")
      ->check(CheckPositiveDuration);
  logs_cmd->add_flag("--timestamps", logs.timestamps, "Prefix each line with its time (RFC 3339, UTC)");
  logs_cmd->add_option("--generation", logs.generation, "Only this generation's lines (default: the current one)")
      ->check(CLI::Range(1, kMaxInt));
  logs_cmd->footer("Example: ringmaster logs j-42 -f --rank 0 --since 10m --timestamps");

  CancelOptions cancel;
  std::string cancel_reason;
  CLI::App* cancel_cmd = app.add_subcommand("cancel", "Cancel jobs (exit 1 if any could not be cancelled)");
  cancel_cmd->add_option("job", cancel.job_ids, "Job ids")->required();
  cancel_cmd->add_option("--reason", cancel_reason, "Why (recorded in each job's timeline)");
  cancel_cmd->footer("Example: ringmaster cancel j-41 j-42 --reason 'wrong lr'");

  CLI::App* nodes_cmd = app.add_subcommand("nodes", "List the registered nodes; cordon, uncordon or drain one");
  nodes_cmd->require_subcommand(0, 1);
  nodes_cmd->fallthrough();
  nodes_cmd->footer(
      "Example: ringmaster nodes -o json\n"
      "Rolling worker upgrade, one node at a time: ringmaster nodes drain NODE; upgrade and restart its worker; "
      "ringmaster nodes uncordon NODE.");
  NodeCommandOptions node_command;
  std::string drain_timeout = "30m";
  CLI::App* cordon_cmd = nodes_cmd->add_subcommand("cordon", "Place no new jobs on a node (what runs there goes on)");
  CLI::App* uncordon_cmd = nodes_cmd->add_subcommand("uncordon", "Let a cordoned or drained node take jobs again");
  CLI::App* drain_cmd = nodes_cmd->add_subcommand(
      "drain", "Cordon a node and move its jobs: each checkpoints now and resumes on other nodes");
  for (CLI::App* sub : {cordon_cmd, uncordon_cmd, drain_cmd}) {
    sub->add_option("node", node_command.node, "Node id (n-3) or hostname")->required();
    sub->fallthrough();
  }
  for (CLI::App* sub : {cordon_cmd, drain_cmd}) {
    sub->add_option("--reason", node_command.reason, "Why (shown by `ringmaster nodes`)");
  }
  drain_cmd->add_flag("!--no-wait", node_command.wait, "Return at once instead of waiting until the node is empty");
  drain_cmd->add_option("--timeout", drain_timeout, "How long to wait for the node to empty (30s, 10m, 1h)")
      ->check(CheckPositiveDuration)
      ->capture_default_str();
  cordon_cmd->footer("Example: ringmaster nodes cordon dgx-07 --reason 'flaky NVLink'");
  uncordon_cmd->footer("Example: ringmaster nodes uncordon dgx-07");
  drain_cmd->footer("Example: ringmaster nodes drain dgx-07 --reason 'driver upgrade' --timeout 20m");

  CLI::App* queues_cmd = app.add_subcommand(
      "queues", "List the queues: quota, use, borrowing, fair-share usage, running and waiting jobs");
  queues_cmd->footer("Example: ringmaster queues -o json\nQueues come from the coordinator's --queues file "
                     "(docs/operations.md).");

  UsageOptions usage;
  CLI::App* usage_cmd = app.add_subcommand("usage", "GPU-hours and CPU-slot-hours used, by user, queue or job");
  usage_cmd->add_option("--by", usage.by, "Group by user, queue or job")
      ->check(CLI::IsMember({"user", "queue", "job"}))
      ->capture_default_str();
  usage_cmd->add_option("--since", usage.since,
                        "Only usage after this time: RFC 3339 (2026-11-01T00:00:00Z) or how long ago (24h, 7d)");
  usage_cmd->footer("Example: ringmaster usage --by queue --since 7d -o csv\nAdmins see everyone's usage, "
                    "other users their own jobs'.");

  CheckpointsOptions checkpoints;
  CLI::App* checkpoints_cmd = app.add_subcommand("checkpoints", "List a job's checkpoints, newest first");
  checkpoints_cmd->add_option("job", checkpoints.job_id, "Job id")->required();
  checkpoints_cmd->add_flag("--all", checkpoints.include_incomplete, "Also checkpoints not every stage committed");
  checkpoints_cmd->footer("Example: ringmaster checkpoints j-42 --all");

  PlanCommandOptions plan;
  CLI::App* plan_cmd =
      app.add_subcommand("plan", "What a spec needs before it runs: memory per rank, step time, time to the end");
  CLI::App* validate_cmd = app.add_subcommand(
      "validate", "Check a spec and print its plan, then check it against the cluster at --coordinator when one "
                  "answers: a node that could run it, data.path in the data roots (exit 1 when it does not fit)");
  for (CLI::App* sub : {plan_cmd, validate_cmd}) {
    sub->add_option("file", plan.file, "Job spec file (.yaml, .yml or .json)")->required();
    sub->add_option("--set", plan.overrides, "Override a field: key.path=value (repeatable)")->allow_extra_args(false);
    sub->add_option("--gpu", plan.gpu, "Device type: h100, h200, a100 or cpu (default: h100 for resources.device "
                                       "cuda, else cpu)")
        ->check(CLI::IsMember(ringmaster::engine::plan::DeviceNames(), CLI::ignore_case));
    sub->add_option("--mfu", plan.mfu,
                    "Assumed model FLOPs utilisation, in (0, 1] (default: 0.4 on a CPU; on a GPU the step time "
                    "comes from a profile by op class, which --mfu overrides)")
        ->check(CLI::Range(1e-6, 1.0));
  }
  plan_cmd->footer("Example: ringmaster plan examples/gpt_text.yaml --set resources.device=cuda "
                   "--set precision.compute=bf16 --gpu h100 -o json");
  validate_cmd->footer("Example: ringmaster validate examples/fashion_mnist_cnn.yaml --set parallelism.data=1 "
                       "--set resources.ranks_per_node=1");

  LocalOptions local;
  local.state_dir = DefaultStateDir();
  // At least 2: every example (examples/*.yaml) runs 2 ranks of 1 CPU slot.
  local.cpu_slots = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  int startup_seconds = 30;
  CLI::App* local_cmd = app.add_subcommand("local", "A coordinator and a worker on this machine");
  local_cmd->require_subcommand(1);
  local_cmd->add_option("--state-dir", local.state_dir, "Pid files, logs and daemon state")->capture_default_str();
  local_cmd->add_option("--bin-dir", local.bin_dir, "Where ringmaster-coordinator and ringmaster-worker are");
  local_cmd->add_option("--cpu-slots", local.cpu_slots, "CPU ranks the worker offers")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  ringmaster::AddClearableOption(*local_cmd, "--metrics-listen", &local.metrics_listen,
                                 "The coordinator's /metrics (host:port; port 0: any free port, named in "
                                 "coordinator.log); the worker's is on the same host, any free port; empty: none");
  local_cmd->add_option("--data-roots", local.data_roots,
                        "Directories a job's data.path may lie in (the worker's --data-roots, comma-separated; "
                        "default: the worker's)")
      ->delimiter(',');
  local_cmd->add_option("--timeout", startup_seconds, "Seconds `up` waits for the daemons")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  local_cmd->fallthrough();
  CLI::App* up_cmd = local_cmd->add_subcommand("up", "Start them (if not running) and wait until they are ready");
  CLI::App* down_cmd = local_cmd->add_subcommand("down", "Stop them (SIGTERM, then SIGKILL)");
  CLI::App* status_cmd = local_cmd->add_subcommand("status", "Show them and the nodes");
  for (CLI::App* sub : {up_cmd, down_cmd, status_cmd}) sub->fallthrough();
  local_cmd->footer("Example: ringmaster local up --cpu-slots 4");
  up_cmd->footer("Example: ringmaster local up --cpu-slots 4 --timeout 60\n"
                 "A second cluster: ringmaster --coordinator 127.0.0.1:50052 local up --state-dir /tmp/rm2");
  down_cmd->footer("Example: ringmaster local down");
  status_cmd->footer("Example: ringmaster local status -o json");

  std::string completion_shell;
  CLI::App* completion_cmd = app.add_subcommand("completion", "Print a shell completion script (bash or zsh)");
  completion_cmd->add_option("shell", completion_shell, "bash or zsh")
      ->check(CLI::IsMember({"bash", "zsh"}))
      ->required();
  completion_cmd->footer("Example: source <(ringmaster completion bash)   # or: completion zsh, in zsh");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  if (app.get_subcommands().empty()) {
    std::cerr << "ringmaster: a command is required: submit, jobs, describe, attach, logs, cancel, nodes, queues, usage, "
                 "checkpoints, plan, validate, local or completion (see --help)\n";
    return kExitUsage;
  }
  if (absl::Status s = ringmaster::SetupLoggingFromFlags(common, "cli"); !s.ok()) {
    std::cerr << "ringmaster: " << s.message() << "\n";
    return kExitUsage;
  }
  gpr_set_log_function(ForwardGrpcLog);
  global.output = ParseOutputFormat(output);
  Console console{std::cout, std::cerr, ::isatty(STDOUT_FILENO) == 1};
  console.in = &std::cin;

  if (completion_cmd->parsed()) return RunCompletion(app, completion_shell, CompletionValues(), console);

  if (local_cmd->parsed()) {
    local.self_exe = SelfExe();
    local.startup_timeout = absl::Seconds(startup_seconds);
    if (up_cmd->parsed()) return RunLocalUp(global, local, console);
    if (down_cmd->parsed()) return RunLocalDown(global, local, console);
    return RunLocalStatus(global, local, console);
  }
  if (plan_cmd->parsed()) return RunPlan(global, plan, console);

  connection.coordinator = global.coordinator;
  connection.home = Getenv("HOME");
  connection.xdg_config_home = Getenv("XDG_CONFIG_HOME");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = ConnectToCoordinator(connection);
  if (validate_cmd->parsed()) {  // against the cluster when there is one to ask
    if (!channel.ok()) return RunValidate(global, plan, console, nullptr, std::string(channel.status().message()));
    std::unique_ptr<JobStub> stub = ringmaster::v1::JobService::NewStub(*channel);
    return RunValidate(global, plan, console, stub.get());
  }
  if (!channel.ok()) {
    std::cerr << "ringmaster: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  std::unique_ptr<JobStub> stub = ringmaster::v1::JobService::NewStub(*channel);
  if (submit_cmd->parsed()) return RunSubmit(*stub, global, submit, console);
  if (jobs_cmd->parsed()) return RunJobs(*stub, global, jobs, console);
  if (describe_cmd->parsed()) return RunDescribe(*stub, global, describe_job, console);
  if (attach_cmd->parsed()) return RunAttach(*stub, global, attach_job, console);
  if (logs_cmd->parsed()) {
    if (logs_rank >= 0) logs.rank = logs_rank;
    if (!logs_since.empty()) {
      absl::Duration since;
      (void)absl::ParseDuration(logs_since, &since);  // checked by the option
      logs.since = since;
    }
    return RunLogs(*stub, global, logs, console);
  }
  if (cancel_cmd->parsed()) {
    cancel.reason = "cancelled by " + UserName() + (cancel_reason.empty() ? "" : ": " + cancel_reason);
    return RunCancel(*stub, global, cancel, console);
  }
  if (nodes_cmd->parsed()) {
    if (cordon_cmd->parsed() || uncordon_cmd->parsed()) {
      return RunCordon(*stub, global, node_command, uncordon_cmd->parsed(), console);
    }
    if (drain_cmd->parsed()) {
      (void)absl::ParseDuration(drain_timeout, &node_command.timeout);  // checked by the option
      return RunDrain(*stub, global, node_command, console);
    }
    return RunNodes(*stub, global, console);
  }
  if (checkpoints_cmd->parsed()) return RunCheckpoints(*stub, global, checkpoints, console);
  if (queues_cmd->parsed()) return RunQueues(*stub, global, console);
  if (usage_cmd->parsed()) return RunUsage(*stub, global, usage, console);
  return kExitUsage;  // unreachable: one command was parsed
}
