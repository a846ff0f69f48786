#include "client/local_cluster.h"

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/daemon.h"
#include "client/health_check.h"
#include "client/output.h"
#include "client/rpc_errors.h"
#include "common/logging.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"

namespace ringmaster::client {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
constexpr absl::Duration kProbeTimeout = absl::Seconds(1);

struct Component {
  std::string name;       // "coordinator"
  std::string binary;     // "ringmaster-coordinator"
  std::string pid_file;
  std::string log_file;
  std::string state_dir;  // its --state-dir
};

Component MakeComponent(const LocalOptions& options, const std::string& name) {
  const std::string dir = options.state_dir;
  return {name, "ringmaster-" + name, dir + "/" + name + ".pid", dir + "/" + name + ".log", dir + "/" + name};
}

// What a daemon row shows.
struct Row {
  std::string name;
  std::string state;  // running | stopped | not running | stale pid file removed
  pid_t pid = 0;
  std::string detail;  // address, node
  std::string log;
};

void PrintRows(const std::vector<Row>& rows, OutputFormat format, const v1::ListNodesResponse* nodes,
               std::ostream& out) {
  if (IsStructured(format)) {
    std::vector<std::string> parts;
    for (const Row& r : rows) {
      parts.push_back(absl::StrCat("\"", r.name, "\":{\"state\":\"", JsonEscape(r.state), "\",\"pid\":", r.pid,
                                   ",\"detail\":\"", JsonEscape(r.detail), "\",\"log\":\"", JsonEscape(r.log),
                                   "\"}"));
    }
    if (nodes != nullptr) {
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(*nodes, &json);
      parts.push_back(absl::StrCat("\"listNodes\":", json));
    }
    const std::string json = absl::StrCat("{", absl::StrJoin(parts, ","), "}");
    if (format == OutputFormat::kYaml) {
      PrintJsonAsYaml(json, out);
    } else {
      out << json << "\n";
    }
    return;
  }
  Table table({"COMPONENT", "STATE", "PID", "DETAIL", "LOG"});
  for (const Row& r : rows) {
    table.AddRow({r.name, r.state, r.pid > 0 ? absl::StrCat(r.pid) : "-", r.detail.empty() ? "-" : r.detail,
                  r.log});
  }
  table.Render(out);
}

// Stops the daemons `up` started when it fails, so that `up` is all or nothing.
class Rollback {
 public:
  explicit Rollback(const LocalOptions& options) : options_(options) {}
  ~Rollback() {
    for (auto it = started_.rbegin(); it != started_.rend(); ++it) {
      (void)StopDaemon(*it, options_.stop_grace, options_.clock);
    }
  }
  void Started(const std::string& pid_file) { started_.push_back(pid_file); }
  void Commit() { started_.clear(); }

 private:
  const LocalOptions& options_;
  std::vector<std::string> started_;
};

std::string StartupFailure(const Component& c, const std::string& what) {
  std::string line = absl::StrCat("the ", c.name, " ", what);
  const std::string last = LastLine(c.log_file);
  if (!last.empty()) absl::StrAppend(&line, ": ", last);
  absl::StrAppend(&line, " (log: ", c.log_file, ")");
  return line;
}

// Starts `c` unless it runs; returns its pid and whether it was started now.
absl::StatusOr<std::pair<pid_t, bool>> Ensure(const LocalOptions& options, const Component& c,
                                              const std::vector<std::string>& args) {
  DaemonState state = ReadDaemon(c.pid_file);
  if (state.running) return std::make_pair(state.pid, false);
  absl::StatusOr<std::string> binary = FindDaemonBinary(options, c.name, c.binary);
  if (!binary.ok()) return binary.status();
  std::error_code ec;
  std::filesystem::create_directories(c.state_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", c.state_dir, ": ", ec.message()));
  absl::StatusOr<pid_t> pid = StartDaemon({*binary, args, c.pid_file, c.log_file});
  if (!pid.ok()) return pid.status();
  return std::make_pair(*pid, true);
}

// Waits until the coordinator serves; an error line otherwise.
std::optional<std::string> AwaitCoordinator(const LocalOptions& options, const Component& c, pid_t pid, bool started,
                                            const std::shared_ptr<grpc::Channel>& channel) {
  const absl::Time deadline = options.clock->Now() + options.startup_timeout;
  std::string last = "no answer";
  for (;;) {
    if (started) {
      if (std::optional<std::string> exit = ReapIfExited(pid)) return StartupFailure(c, *exit);
    }
    ServingStatus serving = ServingStatus::kUnknown;
    grpc::Status status = CheckHealth(channel, kProbeTimeout, /*wait_for_ready=*/true, &serving);
    if (status.ok() && serving == ServingStatus::kServing) return std::nullopt;
    last = status.ok() ? "not serving" : status.error_message();
    if (options.clock->Now() >= deadline) {
      return StartupFailure(c, absl::StrCat("did not answer health checks within ",
                                            absl::FormatDuration(options.startup_timeout), " (", last, ")"));
    }
    options.clock->SleepFor(kPollInterval);
  }
}

// Waits until a READY node registered at or after `since`; fills *node.
std::optional<std::string> AwaitWorker(const GlobalOptions& global, const LocalOptions& options, const Component& c,
                                       pid_t pid, bool started, absl::Time since,
                                       v1::JobService::StubInterface& stub, v1::NodeInfo* node) {
  const absl::Time deadline = options.clock->Now() + options.startup_timeout;
  for (;;) {
    if (started) {
      if (std::optional<std::string> exit = ReapIfExited(pid)) return StartupFailure(c, *exit);
    }
    grpc::ClientContext context;
    SetTimeout(&context, kProbeTimeout);
    v1::ListNodesResponse response;
    grpc::Status status = stub.ListNodes(&context, v1::ListNodesRequest(), &response);
    if (!status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return DescribeRpcError(status, {global.coordinator, "ListNodes", "", kProbeTimeout});
    }
    for (const v1::NodeInfo& n : response.nodes()) {
      if (n.state() == v1::NODE_STATE_READY && FromProto(n.register_time()) >= since) {
        *node = n;
        return std::nullopt;
      }
    }
    if (options.clock->Now() >= deadline) {
      return StartupFailure(c, absl::StrCat("did not register with the coordinator within ",
                                            absl::FormatDuration(options.startup_timeout)));
    }
    options.clock->SleepFor(kPollInterval);
  }
}

std::vector<std::string> WorkerArgs(const LocalOptions& options, const std::string& address, const Component& c) {
  // A local cluster stays on loopback: the ranks advertise and connect to
  // 127.0.0.1, never the machine's other addresses.
  std::vector<std::string> args = {"--coordinator", address,  "--cpu-slots", absl::StrCat(options.cpu_slots),
                                   "--state-dir",   c.state_dir, "--listen-address", "127.0.0.1"};
  // The coordinator's metrics host, any free port: never the coordinator's.
  const size_t colon = options.metrics_listen.rfind(':');
  args.push_back("--metrics-listen");
  args.push_back(options.metrics_listen.empty() ? ""
                 : colon == std::string::npos ? options.metrics_listen + ":0"
                                              : options.metrics_listen.substr(0, colon) + ":0");
  if (!options.data_roots.empty()) {
    args.push_back("--data-roots");
    args.push_back(absl::StrJoin(options.data_roots, ","));
  }
  return args;
}

}  // namespace

absl::StatusOr<std::string> LocalListenAddress(const std::string& coordinator) {
  for (const char* host : {"127.0.0.1:", "localhost:", "[::1]:"}) {
    if (absl::StartsWith(coordinator, host) && coordinator.size() > std::string(host).size()) return coordinator;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "local: --coordinator must be an address on this machine (127.0.0.1:PORT), got \"", coordinator, "\""));
}

absl::StatusOr<std::string> FindDaemonBinary(const LocalOptions& options, const std::string& component,
                                             const std::string& name) {
  std::vector<std::string> candidates;
  if (!options.bin_dir.empty()) {
    candidates.push_back(options.bin_dir + "/" + name);
  } else {
    const std::string dir = std::filesystem::path(options.self_exe).parent_path().string();
    candidates.push_back(dir + "/" + name);
    candidates.push_back(dir + "/../" + component + "/" + name);
  }
  for (const std::string& path : candidates) {
    if (::access(path.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(path)) {
      return std::filesystem::path(path).lexically_normal().string();
    }
  }
  return absl::NotFoundError(absl::StrCat("cannot find ", name, " (looked for ", absl::StrJoin(candidates, ", "),
                                          "); pass --bin-dir"));
}

int RunLocalUp(const GlobalOptions& global, const LocalOptions& options, Console& console) {
  absl::StatusOr<std::string> address = LocalListenAddress(global.coordinator);
  if (!address.ok()) {
    console.err << "ringmaster: " << address.status().message() << "\n";
    return kExitUsage;
  }
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir, ec);
  if (ec) {
    console.err << "ringmaster: cannot create " << options.state_dir << ": " << ec.message() << "\n";
    return kExitError;
  }
  const Component coordinator = MakeComponent(options, "coordinator");
  const Component worker = MakeComponent(options, "worker");
  Rollback rollback(options);
  auto fail = [&](const std::string& line) {
    console.err << "ringmaster: " << line << "\n";
    return kExitError;  // ~Rollback stops what this call started
  };

  auto coordinator_pid = Ensure(options, coordinator, {"--listen", *address, "--state-dir", coordinator.state_dir,
                                                       "--metrics-listen", options.metrics_listen});
  if (!coordinator_pid.ok()) return fail(std::string(coordinator_pid.status().message()));
  if (coordinator_pid->second) rollback.Started(coordinator.pid_file);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(*address, grpc::InsecureChannelCredentials());
  if (auto error = AwaitCoordinator(options, coordinator, coordinator_pid->first, coordinator_pid->second, channel)) {
    return fail(*error);
  }

  const absl::Time worker_since = options.clock->Now() - absl::Seconds(1);
  auto worker_pid = Ensure(options, worker, WorkerArgs(options, *address, worker));
  if (!worker_pid.ok()) return fail(std::string(worker_pid.status().message()));
  if (worker_pid->second) rollback.Started(worker.pid_file);
  std::unique_ptr<v1::JobService::Stub> stub = v1::JobService::NewStub(channel);
  v1::NodeInfo node;
  const absl::Time since = worker_pid->second ? worker_since : absl::InfinitePast();
  if (auto error = AwaitWorker(global, options, worker, worker_pid->first, worker_pid->second, since, *stub, &node)) {
    return fail(*error);
  }
  // A daemon that answered and then died (a crash right after startup).
  for (const auto& [c, pid] : {std::make_pair(&coordinator, coordinator_pid->first),
                               std::make_pair(&worker, worker_pid->first)}) {
    if (std::optional<std::string> exit = ReapIfExited(pid)) return fail(StartupFailure(*c, *exit));
  }
  rollback.Commit();
  PrintRows({{"coordinator", coordinator_pid->second ? "started" : "running", coordinator_pid->first, *address,
              coordinator.log_file},
             {"worker", worker_pid->second ? "started" : "running", worker_pid->first,
              absl::StrCat("node ", node.node_id(), " (", node.hostname(), ")"), worker.log_file}},
            global.output, nullptr, console.out);
  return kExitOk;
}

int RunLocalDown(const GlobalOptions& global, const LocalOptions& options, Console& console) {
  std::vector<Row> rows;
  for (const char* name : {"worker", "coordinator"}) {
    const Component c = MakeComponent(options, name);
    absl::StatusOr<DaemonState> stopped = StopDaemon(c.pid_file, options.stop_grace, options.clock);
    if (!stopped.ok()) {
      console.err << "ringmaster: cannot stop the " << name << ": " << stopped.status().message() << "\n";
      return kExitError;
    }
    std::string state = stopped->running ? "stopped" : stopped->pid_file_exists ? "stale pid file removed"
                                                                                 : "not running";
    rows.push_back({name, state, stopped->running ? stopped->pid : 0, "", c.log_file});
  }
  PrintRows(rows, global.output, nullptr, console.out);
  return kExitOk;
}

int RunLocalStatus(const GlobalOptions& global, const LocalOptions& options, Console& console) {
  const Component coordinator = MakeComponent(options, "coordinator");
  const Component worker = MakeComponent(options, "worker");
  const DaemonState c = ReadDaemon(coordinator.pid_file);
  const DaemonState w = ReadDaemon(worker.pid_file);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(global.coordinator, grpc::InsecureChannelCredentials());
  ServingStatus serving = ServingStatus::kUnknown;
  const bool healthy = c.running && CheckHealth(channel, kProbeTimeout, /*wait_for_ready=*/false, &serving).ok() &&
                       serving == ServingStatus::kServing;
  std::optional<v1::ListNodesResponse> nodes;
  if (healthy) {
    std::unique_ptr<v1::JobService::Stub> stub = v1::JobService::NewStub(channel);
    grpc::ClientContext context;
    SetTimeout(&context, kProbeTimeout);
    v1::ListNodesResponse response;
    if (stub->ListNodes(&context, v1::ListNodesRequest(), &response).ok()) nodes = response;
  }
  std::string coordinator_state = !c.running ? "not running" : healthy ? "running" : "running, not serving";
  std::vector<Row> rows = {
      {"coordinator", coordinator_state, c.running ? c.pid : 0, global.coordinator, coordinator.log_file},
      {"worker", w.running ? "running" : "not running", w.running ? w.pid : 0, "", worker.log_file}};
  PrintRows(rows, global.output, nodes ? &*nodes : nullptr, console.out);
  if (!IsStructured(global.output) && nodes) {
    console.out << "\n";
    Table table({"NODE", "HOSTNAME", "STATE", "CPUS", "GPUS"});
    for (const v1::NodeInfo& n : nodes->nodes()) {
      table.AddRow({n.node_id(), n.hostname(), NodeStateName(n.state()),
                    absl::StrCat(n.free_cpu_slots(), "/", n.cpu_slots()), absl::StrCat(n.free_gpus(), "/", n.gpus_size())});
    }
    table.Render(console.out);
  }
  if (!c.running && !w.running) {
    console.err << "ringmaster: the local cluster is not running; start it with `ringmaster local up`\n";
    return kExitError;
  }
  if (!healthy || !w.running) {
    std::vector<std::string> problems;
    if (!c.running) problems.push_back("the coordinator is not running");
    if (c.running && !healthy) problems.push_back(absl::StrCat("the coordinator does not serve at ", global.coordinator));
    if (!w.running) problems.push_back("the worker is not running");
    console.err << "ringmaster: the local cluster is partly running: " << absl::StrJoin(problems, "; ") << "\n";
    return kExitError;
  }
  return kExitOk;
}

}  // namespace ringmaster::client
