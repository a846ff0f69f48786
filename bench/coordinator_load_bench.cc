// Coordinator load benchmark: simulated workers speaking the real
// gRPC API to a real ringmaster-coordinator process.
//
//   bazel run //bench:coordinator_load_bench -- [--nodes 512] [--gpus 8] [--duration 10]
//       [--coordinator PATH | --connect HOST:PORT [--pid PID]] [--channels 8]
//
// Phases, each timed on this side with a steady clock:
//   (a) registration: every node calls Register at once (async) and opens its
//       Session; time from the first Register until ListNodes (polled every
//       10 ms) shows N READY nodes, and until every session got its first
//       LeaseGrant;
//   (b) a CUDA job of N x G ranks (one per GPU, data parallel): time from
//       Submit until every node received its StartRanks, and until every rank
//       obtained the NCCL unique id of "world" (rank 0 publishes it, the others
//       call GetNcclUniqueId with the job id and generation of their order);
//       the ranks then stay "running" (listed in heartbeats) through (c) and
//       finally report exit 0, so the job SUCCEEDS;
//   (c) heartbeats at 1 Hz per node, spread evenly over the second, for
//       --duration seconds: the round trip of a Heartbeat to the LeaseGrant
//       that answers it on the Session stream;
//   (d) the coordinator's VmHWM and VmRSS (/proc/<pid>/status) at the end.
// Prints a table of goal vs measured. Exit status 0 when every phase
// completed (whatever the numbers; with --enforce-goals, and every goal was
// met), 1 otherwise.
//
// Bounded: every call of the simulated nodes has a deadline of at most the
// phase timeout, every wait ends at its phase's deadline, and a watchdog
// ends the run (exit 1, naming the phase and how far it got) if it is still
// going after the sum of the phases' bounds. The coordinator it starts dies
// with it (PR_SET_PDEATHSIG).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "bench/coordinator_process.h"
#include "bench/load_report.h"
#include "bench/sim_node.h"
#include "bench/sim_recorder.h"
#include "bench/watchdog.h"
#include "grpcpp/grpcpp.h"
#include "proto/job_service.grpc.pb.h"

namespace ringmaster::bench {
namespace {

using Count = SimRecorder::Count;
using std::chrono::steady_clock;

struct Flags {
  int nodes = 512;
  int gpus = 8;
  double duration_s = 10;
  int channels = 8;
  std::string coordinator = "coordinator/ringmaster-coordinator";
  std::string coordinator_log_level = "info";
  std::string connect;
  int pid = 0;
  bool keep_state = false;
  double phase_timeout_s = 120;
  bool enforce_goals = false;
  // Goals; 0: the defaults of GoalsFor.
  double goal_registration_s = 0;
  double goal_nccl_id_s = 0;
  double goal_p99_ms = 0;
  double goal_peak_mb = 0;
};

// The deadline of one polling call: the phase's, and at most 10 s away.
std::chrono::system_clock::time_point CallDeadline(steady_clock::time_point phase_deadline) {
  const steady_clock::duration left = std::max<steady_clock::duration>(phase_deadline - steady_clock::now(),
                                                                       std::chrono::milliseconds(1));
  return std::chrono::system_clock::now() + std::min<steady_clock::duration>(left, std::chrono::seconds(10));
}

v1::JobSpec LoadJobSpec(int nodes, int gpus) {
  v1::JobSpec spec;
  spec.set_name("load-bench");
  spec.mutable_model()->mutable_mlp();
  spec.mutable_data()->set_dataset(v1::DataSpec::SYNTHETIC);
  spec.mutable_data()->set_batch_size(nodes * gpus);  // one sample per data-parallel rank
  spec.mutable_training()->set_steps(10);
  spec.mutable_resources()->set_nodes(nodes);
  spec.mutable_resources()->set_ranks_per_node(gpus);
  spec.mutable_resources()->set_device(v1::ResourceSpec::CUDA);
  spec.mutable_restart()->set_max_restarts(0);
  return spec;
}

// Channels that do not share a connection (a distinct argument each).
std::vector<std::shared_ptr<grpc::Channel>> MakeChannels(const std::string& address, int n) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("ringmaster.bench.channel", i);
    channels.push_back(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  return channels;
}

// Heartbeats node i at start + k * period + i * period / n, k = 0, 1, ...
// (a node without a session yet skips its turn).
void HeartbeatLoop(const std::vector<std::unique_ptr<SimNode>>& nodes, const std::atomic<bool>& stop,
                   steady_clock::duration period) {
  const steady_clock::time_point start = steady_clock::now();
  const auto n = static_cast<int64_t>(nodes.size());
  for (int64_t k = 0; !stop.load(); ++k) {
    for (int64_t i = 0; i < n && !stop.load(); ++i) {
      std::this_thread::sleep_until(start + k * period + i * period / n);
      nodes[i]->SendHeartbeat();
    }
  }
}

// Polls ListNodes until `n` nodes are READY, `stop` or `deadline` (the
// phase's bound: the registration phase fails then, rather than waiting for
// nodes that will never be READY); the time they were seen, or a default
// time_point when they were not.
steady_clock::time_point PollReady(v1::JobService::Stub* jobs, int n, const std::atomic<bool>& stop,
                                   steady_clock::time_point deadline) {
  while (!stop.load() && steady_clock::now() < deadline) {
    grpc::ClientContext context;
    context.set_deadline(CallDeadline(deadline));
    v1::ListNodesRequest request;
    request.add_states(v1::NODE_STATE_READY);
    request.set_page_size(1);  // the count is all it needs (a whole page of 2,048 nodes is 1.4 MB)
    v1::ListNodesResponse response;
    if (jobs->ListNodes(&context, request, &response).ok() && response.total_size() >= n) return steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return steady_clock::time_point();
}

// Polls GetJob until the job is in `state` (or terminal); the job last read.
v1::Job WaitForState(v1::JobService::Stub* jobs, const std::string& job_id, v1::JobState state,
                     steady_clock::time_point deadline, bool events, std::vector<v1::JobEvent>* timeline) {
  v1::Job job;
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(CallDeadline(deadline));
    v1::GetJobRequest request;
    request.set_job_id(job_id);
    request.set_include_events(events);
    v1::GetJobResponse response;
    if (jobs->GetJob(&context, request, &response).ok()) {
      job = response.job();
      if (timeline != nullptr) timeline->assign(response.events().begin(), response.events().end());
      const v1::JobState s = job.state();
      if (s == state || s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED) {
        return job;
      }
    }
    if (steady_clock::now() >= deadline) return job;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The goals: every node READY within 1 s; 512 x 8 ranks get the NCCL id
// within 1 s of the submission, and the coordinator stays under 256 MB;
// 2048 x 8 within 3 s and under 512 MB; heartbeat round trips p99 < 10 ms.
// A flag may set each instead (the suite's smaller runs on loaded machines).
struct Goals {
  double registration_seconds;
  double nccl_id_seconds;
  double p99_ms;
  double peak_mb;
};
Goals GoalsFor(const Flags& flags) {
  const int world = flags.nodes * flags.gpus;
  Goals goals = world <= 4096 ? Goals{1.0, 1.0, 10, 256} : Goals{1.0, 3.0, 10, 512};
  if (flags.goal_registration_s > 0) goals.registration_seconds = flags.goal_registration_s;
  if (flags.goal_nccl_id_s > 0) goals.nccl_id_seconds = flags.goal_nccl_id_s;
  if (flags.goal_p99_ms > 0) goals.p99_ms = flags.goal_p99_ms;
  if (flags.goal_peak_mb > 0) goals.peak_mb = flags.goal_peak_mb;
  return goals;
}

// Where the run is, for the watchdog: the phase and what it waits for.
class Progress {
 public:
  explicit Progress(const SimRecorder* recorder) : recorder_(recorder) {}
  void Enter(std::string phase) {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = std::move(phase);
  }
  // "phase P: sessions a, assignments b, NCCL ids c, exits d".
  std::string Describe() const {
    std::lock_guard<std::mutex> lock(mu_);
    return absl::StrCat("phase ", phase_, ": sessions ", recorder_->count(Count::kSessions), ", assignments ",
                        recorder_->count(Count::kAssignments), ", NCCL ids ", recorder_->count(Count::kRankIds),
                        ", exits ", recorder_->count(Count::kExits), ", errors ", recorder_->errors());
  }

 private:
  const SimRecorder* recorder_;
  mutable std::mutex mu_;
  std::string phase_ = "start";
};

// One run against a coordinator (started here unless --connect): the
// simulated nodes, then the phases in order, each adding rows to the table
// or saying what FAILED.
class LoadRun {
 public:
  LoadRun(const Flags& flags, std::string address, std::unique_ptr<CoordinatorProcess> process, pid_t pid)
      : flags_(flags),
        n_(flags.nodes),
        world_(flags.nodes * flags.gpus),
        goals_(GoalsFor(flags)),
        phase_timeout_(static_cast<int64_t>(flags.phase_timeout_s * 1000)),
        process_(std::move(process)),
        pid_(pid),
        channels_(MakeChannels(address, flags.channels)),
        jobs_(v1::JobService::NewStub(channels_[0])),
        progress_(&recorder_),
        // Everything waits at most: 3 phases, the id and running waits, the
        // exits and SUCCEEDED waits (a phase timeout each), the heartbeat
        // window, closing (10 s + the cancel grace) and the coordinator's stop (15 s).
        watchdog_(7 * phase_timeout_ + std::chrono::milliseconds(static_cast<int64_t>(flags.duration_s * 1000)) +
                      std::chrono::seconds(60),
                  [this] { return progress_.Describe(); }, process_ != nullptr ? pid : 0,
                  process_ != nullptr && !flags.keep_state ? process_->dir() : "") {
    for (auto& channel : channels_) stubs_.push_back(std::make_unique<SimStubs>(channel));
    for (auto& c : channels_) c->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
    // A call never outlives its phase (nor the minute a real worker allows).
    const auto rpc_timeout = std::min<std::chrono::milliseconds>(phase_timeout_, std::chrono::seconds(60));
    for (int i = 0; i < n_; ++i) {
      nodes_.push_back(
          std::make_unique<SimNode>(i, flags.gpus, stubs_[i % stubs_.size()].get(), &recorder_, rpc_timeout));
    }
  }

  // The exit status: 0 when every phase completed (and, with
  // --enforce-goals, every goal was met).
  int Run() {
    heartbeats_ = std::thread([this] { HeartbeatLoop(nodes_, stop_, std::chrono::seconds(1)); });
    Registration();
    if (complete_) StartJob();
    Heartbeats();
    if (!job_id_.empty()) ExitReports();
    Close();
    PrintTable(rows_);
    std::printf("%s\n", complete_ ? "all phases completed" : "INCOMPLETE: see FAILED above");
    const int missed =
        static_cast<int>(std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return r.result == "MISS"; }));
    if (flags_.enforce_goals && missed > 0) std::printf("GOALS MISSED: %d (--enforce-goals)\n", missed);
    return complete_ && !(flags_.enforce_goals && missed > 0) ? 0 : 1;
  }

 private:
  // Says what failed, where the run was, and the nodes' first errors (at
  // once: a later phase may not end).
  void Fail(const std::string& what) {
    std::printf("FAILED: %s (%s)\n", what.c_str(), progress_.Describe().c_str());
    for (const std::string& e : recorder_.first_errors()) std::printf("  %s\n", e.c_str());
    std::fflush(stdout);
    complete_ = false;
  }

  // (a) every node registers at once and opens its session.
  void Registration() {
    progress_.Enter("registration");
    const steady_clock::time_point t_register = steady_clock::now();
    steady_clock::time_point t_ready;
    std::thread poller([&] { t_ready = PollReady(jobs_.get(), n_, stop_, t_register + phase_timeout_); });
    for (auto& node : nodes_) node->Register();
    const bool sessions = recorder_.WaitFor(Count::kSessions, n_, t_register + phase_timeout_);
    poller.join();
    if (!sessions || t_ready == steady_clock::time_point()) {
      Fail(absl::StrCat("registration: not every node READY with its session within ", flags_.phase_timeout_s,
                        " s (", recorder_.count(Count::kSessions), "/", n_, " sessions granted a lease; READY ",
                        t_ready == steady_clock::time_point() ? "not seen" : "seen", ")"));
    }
    const std::string registration =
        absl::StrCat("registration: ", n_, " nodes x ", flags_.gpus, " GPUs READY (ListNodes)");
    if (t_ready == steady_clock::time_point()) {
      rows_.push_back({registration, absl::StrFormat("< %g s", goals_.registration_seconds), "not reached", "MISS"});
    } else {
      rows_.push_back(Timed(registration, Seconds(t_ready - t_register), goals_.registration_seconds));
    }
    if (sessions) {
      rows_.push_back(Timed("  ... and every Session granted a lease",
                            Seconds(recorder_.last(Count::kSessions) - t_register), 0));
    } else {
      rows_.push_back({"  ... and every Session granted a lease", "-", "not reached", "-"});
    }
  }

  // (b) a job of every GPU: its start orders and NCCL ids, then RUNNING.
  void StartJob() {
    progress_.Enter("job start (Submit, StartRanks, NCCL ids)");
    const steady_clock::time_point t_submit = steady_clock::now();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + phase_timeout_);
    v1::SubmitJobRequest request;
    *request.mutable_spec() = LoadJobSpec(n_, flags_.gpus);
    v1::SubmitJobResponse response;
    grpc::Status status = jobs_->Submit(&context, request, &response);
    if (!status.ok()) {
      Fail(absl::StrCat("Submit: ", status.error_message()));
      return;
    }
    job_id_ = response.job().id();
    const bool assigned = recorder_.WaitFor(Count::kAssignments, n_, t_submit + phase_timeout_);
    const bool ids = assigned && recorder_.WaitFor(Count::kRankIds, world_, t_submit + phase_timeout_);
    if (!ids) {
      Fail(absl::StrCat("assignments ", recorder_.count(Count::kAssignments), "/", n_, ", NCCL ids ",
                        recorder_.count(Count::kRankIds), "/", world_));
    }
    if (recorder_.rank_id_failures() > 0) Fail(absl::StrCat(recorder_.rank_id_failures(), " ranks got no NCCL id"));
    rows_.push_back(Timed(absl::StrCat("submit -> StartRanks received by all ", n_, " nodes"),
                          Seconds(recorder_.last(Count::kAssignments) - t_submit), 0));
    rows_.push_back(Timed(absl::StrCat("submit -> NCCL unique id at all ", world_, " ranks"),
                          Seconds(recorder_.last(Count::kRankIds) - t_submit), goals_.nccl_id_seconds));
    const SimRecorder::PlacementParse parse = recorder_.placement_parse();
    if (parse.world_size != world_) Fail(absl::StrCat("node 0's placement has world size ", parse.world_size));
    rows_.push_back({absl::StrFormat("  (node 0 parses its slice of the placement: %zu bytes)", parse.bytes), "-",
                     absl::StrFormat("%.3f ms", parse.ms), "-"});
    const v1::Job running =
        WaitForState(jobs_.get(), job_id_, v1::JOB_STATE_RUNNING, steady_clock::now() + phase_timeout_, false, nullptr);
    if (running.state() != v1::JOB_STATE_RUNNING) {
      Fail(absl::StrCat("job ", job_id_, " is ", v1::JobState_Name(running.state()), ", not RUNNING: ",
                        running.message()));
    }
  }

  // (c) heartbeats while the job runs: the round trips to their grants.
  void Heartbeats() {
    progress_.Enter("heartbeats");
    recorder_.SetRecording(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(flags_.duration_s * 1000)));
    recorder_.SetRecording(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last grants
    const std::vector<HeartbeatSample> samples = recorder_.heartbeats();
    std::vector<double> rtt;
    for (const HeartbeatSample& s : samples) rtt.push_back(s.ms);
    PrintSlowHeartbeats(samples, 10.0);
    const std::string window =
        absl::StrFormat("(1 Hz x %d nodes, %.0f s, %d samples)", n_, flags_.duration_s, rtt.size());
    // Every node heartbeats once a second: at least duration - 1 per node.
    if (rtt.size() < static_cast<size_t>(n_ * (flags_.duration_s - 1))) {
      Fail(absl::StrCat("only ", rtt.size(), " heartbeats answered"));
    }
    const double p99 = Percentile(rtt, 0.99);
    rows_.push_back({absl::StrCat("heartbeat -> lease grant p50 ", window), "-",
                     absl::StrFormat("%.3f ms", Percentile(rtt, 0.5)), "-"});
    rows_.push_back({"heartbeat -> lease grant p99", absl::StrFormat("< %g ms", goals_.p99_ms),
                     absl::StrFormat("%.3f ms", p99), p99 < goals_.p99_ms ? "pass" : "MISS"});
    rows_.push_back({"heartbeat -> lease grant max", "-", absl::StrFormat("%.3f ms", Percentile(rtt, 1.0)), "-"});
  }

  // The ranks exit 0: the job succeeds.
  void ExitReports() {
    progress_.Enter("exit reports");
    const steady_clock::time_point t_exit = steady_clock::now();
    for (auto& node : nodes_) node->ReportExits();
    if (!recorder_.WaitFor(Count::kExits, world_, t_exit + phase_timeout_)) Fail("not every exit report was answered");
    std::vector<v1::JobEvent> timeline;
    const v1::Job done = WaitForState(jobs_.get(), job_id_, v1::JOB_STATE_SUCCEEDED,
                                      steady_clock::now() + phase_timeout_, true, &timeline);
    rows_.push_back(Timed(absl::StrCat("first exit report -> job ", v1::JobState_Name(done.state()).substr(10)),
                          Seconds(steady_clock::now() - t_exit), 0));
    if (done.state() != v1::JOB_STATE_SUCCEEDED) Fail(absl::StrCat("job ", job_id_, " ended ", done.message()));
    PrintTimeline(done, timeline);
  }

  // (d) the coordinator's memory, then everything stops.
  void Close() {
    progress_.Enter("closing");
    const ProcessMemory memory = pid_ > 0 ? ReadProcessMemory(pid_) : ProcessMemory{};
    stop_ = true;
    heartbeats_.join();
    for (auto& node : nodes_) node->Close();
    const steady_clock::time_point close_deadline = steady_clock::now() + std::chrono::seconds(10);
    int cancelled = 0, stuck = 0;
    for (auto& node : nodes_) {
      const SimNode::Ending ending = node->WaitDone(close_deadline);
      cancelled += ending == SimNode::Ending::kByThemselves ? 0 : 1;
      stuck += ending == SimNode::Ending::kStuck ? 1 : 0;
    }
    if (cancelled > 0) Fail(absl::StrCat(cancelled, " nodes' sessions or calls did not end when closed"));
    if (stuck > 0) {  // their callbacks may still run: the nodes cannot be destroyed
      Fail(absl::StrCat(stuck, " nodes' calls did not end even when cancelled"));
      if (process_ != nullptr) std::printf("coordinator %s\n", process_->Stop().c_str());
      std::_Exit(1);
    }
    if (memory.vm_hwm >= 0) {
      const double hwm_mb = static_cast<double>(memory.vm_hwm) / (1 << 20);
      rows_.push_back({"coordinator VmHWM (peak resident set)", absl::StrFormat("< %.0f MB", goals_.peak_mb),
                       absl::StrFormat("%.1f MB", hwm_mb), hwm_mb < goals_.peak_mb ? "pass" : "MISS"});
      rows_.push_back({"coordinator VmRSS at the end", "-",
                       absl::StrFormat("%.1f MB", static_cast<double>(memory.vm_rss) / (1 << 20)), "-"});
      rows_.push_back({"coordinator threads at the end", "-", absl::StrCat(memory.threads), "-"});
    }
    if (process_ != nullptr) {
      const std::string stopped = process_->Stop();
      std::printf("coordinator %s\n", stopped.c_str());
      if (stopped != "exited 0") Fail(absl::StrCat("coordinator ", stopped, "\n", process_->LogTail(10)));
    }
    if (recorder_.errors() > 0) {
      Fail(absl::StrCat(recorder_.errors(), " errors"));
      for (const std::string& e : recorder_.first_errors()) std::printf("  %s\n", e.c_str());
    }
    std::printf("stop orders received: %d\n", recorder_.stops());
  }

  const Flags& flags_;
  const int n_, world_;
  const Goals goals_;
  const std::chrono::milliseconds phase_timeout_;
  const std::unique_ptr<CoordinatorProcess> process_;  // null with --connect
  const pid_t pid_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::vector<std::unique_ptr<SimStubs>> stubs_;
  SimRecorder recorder_;
  Progress progress_;
  Watchdog watchdog_;  // disarmed last but for the above, once the nodes are gone
  std::vector<std::unique_ptr<SimNode>> nodes_;
  std::atomic<bool> stop_{false};
  std::thread heartbeats_;
  std::vector<Row> rows_;
  bool complete_ = true;
  std::string job_id_;
};

int Run(const Flags& flags) {
  std::unique_ptr<CoordinatorProcess> process;
  std::string address = flags.connect;
  pid_t pid = flags.pid;
  if (address.empty()) {
    CoordinatorProcessOptions options;
    options.binary = flags.coordinator;
    options.extra_args = {"--heartbeat-interval", "1s", "--log-level", flags.coordinator_log_level};
    options.keep_state = flags.keep_state;
    absl::StatusOr<std::unique_ptr<CoordinatorProcess>> started = CoordinatorProcess::Start(options);
    if (!started.ok()) {
      std::fprintf(stderr, "coordinator_load_bench: %s\n", started.status().ToString().c_str());
      return 1;
    }
    process = *std::move(started);
    address = process->address();
    pid = process->pid();
    std::printf("coordinator pid %d on %s, state in %s\n", pid, address.c_str(), process->dir().c_str());
  }
  std::printf("simulating %d nodes x %d GPUs (%d ranks) over %d channels; heartbeat window %.0f s\n", flags.nodes,
              flags.gpus, flags.nodes * flags.gpus, flags.channels, flags.duration_s);
  return LoadRun(flags, address, std::move(process), pid).Run();
}

}  // namespace
}  // namespace ringmaster::bench

int main(int argc, char** argv) {
  CLI::App app{"Simulated workers against a real ringmaster-coordinator"};
  ringmaster::bench::Flags flags;
  app.add_option("--nodes", flags.nodes, "Simulated nodes")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--gpus", flags.gpus, "GPUs per node (one rank each)")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--duration", flags.duration_s, "Heartbeat measurement window, seconds")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--channels", flags.channels, "gRPC channels (connections) the nodes share")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--coordinator", flags.coordinator, "ringmaster-coordinator binary to start")->capture_default_str();
  app.add_option("--coordinator-log-level", flags.coordinator_log_level, "--log-level of the coordinator")
      ->capture_default_str();
  app.add_option("--connect", flags.connect, "Use a running coordinator at HOST:PORT instead of starting one");
  app.add_option("--pid", flags.pid, "With --connect: the coordinator's pid, for its memory");
  app.add_option("--phase-timeout", flags.phase_timeout_s, "Longest wait of each phase, seconds")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_flag("--keep-state", flags.keep_state, "Keep the coordinator's temporary state directory");
  app.add_flag("--enforce-goals", flags.enforce_goals, "Exit 1 when a goal is missed, too");
  app.add_option("--goal-registration", flags.goal_registration_s, "Registration goal, seconds (default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--goal-nccl-id", flags.goal_nccl_id_s,
                 "Submit -> NCCL id at all ranks goal, seconds (default 1 up to 4,096 ranks, else 3)")
      ->check(CLI::PositiveNumber);
  app.add_option("--goal-p99", flags.goal_p99_ms, "Heartbeat round trip p99 goal, ms (default 10)")
      ->check(CLI::PositiveNumber);
  app.add_option("--goal-peak-mb", flags.goal_peak_mb,
                 "Coordinator VmHWM goal, MB (default 256 up to 4,096 ranks, else 512)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return ringmaster::bench::Run(flags);
}
