// ringmaster-trainer: trains one job spec.
//
//   ringmaster-trainer --rank-context FILE            a rank its worker started
//   ringmaster-trainer --spec FILE [--set key=value ...] [--checkpoint-dir DIR]
//   ringmaster-trainer --spec FILE --nproc N ...      N local ranks (data x pipeline)
//   ringmaster-trainer --spec FILE --rank R --world-size N --rendezvous file:DIR|tcp:HOST:PORT
//
// A worker writes each rank's context (proto/rank_context.proto: job,
// generation, coordinates, rendezvous, resume checkpoint, device) to a file
// and passes it with --rank-context; it is read here, once. A rank started by
// hand takes its rank, world size, local rank and rendezvous from the flags
// or from RINGMASTER_RANK, RINGMASTER_WORLD_SIZE, RINGMASTER_LOCAL_RANK and
// RINGMASTER_RENDEZVOUS (and RINGMASTER_HOST); this file is the only place
// the environment is read.
//
// Resumes from the committed checkpoint its context names (else, by hand, the
// newest good checkpoint in DIR), shows a live progress line (rank 0),
// evaluates on the held-out data, prints rank 0's peak tensor memory
// (`peak_memory_bytes=N`) and, for classifiers, `test_accuracy=0.XXXX` as its
// last line (others: `test_loss=X.XXXX`). With --nproc, it starts N ranks of
// itself (engine/train/launcher.h); a rank that fails stops the others.
//
// A rank its worker started on the CPU whose generation ends while it lives
// (its Gloo world broke when a peer died, or the worker stopped it for a
// restart) asks the worker to carry it on in the job's next generation
// (AgentService.Rejoin, worker/process_supervisor.h). When the next
// generation's start order adopts the process, the rank tears nothing down
// but its trainer and world: it reads the new rank context, joins the new
// world and resumes from the committed checkpoint like any new rank, with
// the data sets it loaded kept (no process start, no data reload). When it
// is not adopted it exits as it would have.
//
// Exit status: 0 when done (or stopped), kExitUnrecoverable (common/
// exit_codes.h) when its spec or context is invalid, its data may not be read
// (PERMISSION_DENIED) or the coordinator refused a commit as INVALID_ARGUMENT
// (no restart can help), 1 otherwise.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/cli_flags.h"
#include "common/exit_codes.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "engine/core/tensor.h"
#include "engine/train/agent_client.h"
#include "engine/train/join_world.h"
#include "engine/train/launcher.h"
#include "engine/train/progress.h"
#include "engine/train/rank_context.h"
#include "engine/train/state_dump.h"
#include "engine/train/step_mean.h"
#include "engine/train/trainer.h"
#include "engine/train/trainer_config.h"
#include "spdlog/spdlog.h"

namespace {

using ringmaster::v1::RankContext;

int Fail(const absl::Status& status, bool unrecoverable = false) {
  std::fprintf(stderr, "ringmaster-trainer: %s\n", std::string(status.message()).c_str());
  return unrecoverable ? ringmaster::kExitUnrecoverable : 1;
}

// Runs `nproc` ranks of this binary with the same arguments, less --nproc,
// meeting in a fresh rendezvous directory.
int LaunchLocalRanks(int nproc, int argc, char** argv) {
  char dir_template[] = "/tmp/ringmaster-rendezvous-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return Fail(absl::InternalError("cannot create a rendezvous directory"));
  ringmaster::engine::LaunchOptions options;
  options.nproc = nproc;
  options.argv.push_back("/proc/self/exe");
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (arg.rfind("--nproc=", 0) == 0) continue;
    options.argv.push_back(arg);
  }
  options.env["RINGMASTER_RENDEZVOUS"] = std::string("file:") + dir_template;
  absl::Status status = ringmaster::engine::RunLocalRanks(options);
  std::error_code ignored;
  std::filesystem::remove_all(dir_template, ignored);
  return status.ok() ? 0 : Fail(status);
}

// The flag's value if given (>= 0), else the variable's, else `fallback`.
absl::StatusOr<int> FlagOrEnv(int flag, const char* variable, int fallback) {
  if (flag >= 0) return flag;
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return fallback;
  int n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return absl::InvalidArgumentError(absl::StrCat(variable, ": expected an integer, got \"", value, "\""));
  }
  return n;
}

std::string StringFlagOrEnv(const std::string& flag, const char* variable) {
  if (!flag.empty()) return flag;
  const char* value = std::getenv(variable);
  return value != nullptr ? value : "";
}

struct HandFlags {
  std::string spec_path;
  std::vector<std::string> overrides;
  std::string checkpoint_dir;
  int rank = -1, world_size = -1, local_rank = -1;
  std::string rendezvous;
};

// The context of a rank started by hand, from its flags and variables.
absl::StatusOr<RankContext> HandStartContext(const HandFlags& flags) {
  if (flags.spec_path.empty()) return absl::InvalidArgumentError("--spec: required (or --rank-context)");
  absl::StatusOr<ringmaster::v1::JobSpec> spec = ringmaster::LoadJobSpecFile(flags.spec_path, flags.overrides);
  if (!spec.ok()) return spec.status();
  ringmaster::engine::HandStartedRank hand;
  ASSIGN_OR_RETURN(hand.rank, FlagOrEnv(flags.rank, "RINGMASTER_RANK", 0));
  ASSIGN_OR_RETURN(hand.world_size, FlagOrEnv(flags.world_size, "RINGMASTER_WORLD_SIZE", 1));
  ASSIGN_OR_RETURN(hand.local_rank, FlagOrEnv(flags.local_rank, "RINGMASTER_LOCAL_RANK", -1));
  hand.rendezvous = StringFlagOrEnv(flags.rendezvous, "RINGMASTER_RENDEZVOUS");
  hand.host = StringFlagOrEnv("", "RINGMASTER_HOST");
  hand.checkpoint_dir = flags.checkpoint_dir.empty() ? spec->checkpoint().directory() : flags.checkpoint_dir;
  if (!hand.checkpoint_dir.empty()) {  // relative to where the rank was started
    hand.checkpoint_dir = std::filesystem::absolute(hand.checkpoint_dir).lexically_normal().string();
  }
  // One visible GPU (CUDA_VISIBLE_DEVICES=<one>): it is device 0.
  const std::string visible = StringFlagOrEnv("", "CUDA_VISIBLE_DEVICES");
  if (!visible.empty() && visible.find(',') == std::string::npos) hand.pinned_gpu = visible;
  return ringmaster::engine::RankContextForHandStart(*std::move(spec), hand);
}

// What the rank's log lines say it is: "trainer r3" (or "trainer" alone).
std::string LogComponent(const RankContext& context) {
  return context.world().world_size() > 1 ? absl::StrCat("trainer r", context.rank().global_rank()) : "trainer";
}

// How long a rank whose generation ended waits for the worker's answer to
// its rejoin (the worker answers within its own bounds: a few seconds for the
// restart order, a minute for the next generation's start).
constexpr absl::Duration kRejoinWait = absl::Seconds(90);

struct RankFlags {
  int threads = 0;
  std::string device = "auto";
  int64_t max_steps = -1;
  double timeout_seconds = 300;
};

// The data sets, loading while the rank joins its world. A rank that carries
// on in the next generation keeps them when its data, model and data root
// are the same.
class DataSets {
 public:
  std::shared_future<absl::StatusOr<ringmaster::engine::TrainingData>> For(
      const RankContext& context, const ringmaster::engine::TrainerConfig& config) {
    const std::string key = absl::StrCat(context.data_root(), "\n", context.spec().data().SerializeAsString(), "\n",
                                         context.spec().model().SerializeAsString());
    if (!loaded_.valid() || key != key_) {
      key_ = key;
      loaded_ = std::async(std::launch::async, [config] { return ringmaster::engine::LoadTrainingData(config); });
    }
    return loaded_;
  }

 private:
  std::string key_;
  std::shared_future<absl::StatusOr<ringmaster::engine::TrainingData>> loaded_;
};

// What one generation of this rank ended with.
struct GenerationEnd {
  int exit_code = 0;
  // Non-empty: the worker adopted this process for the next generation; its
  // rank context.
  std::string next_context;
};

// Runs this rank for one generation of its job: joins its world, trains,
// and (rank 0, when done) prints the final report.
GenerationEnd RunGeneration(const RankContext& context, const RankFlags& flags,
                            DataSets* data_sets) {
  const int rank = context.rank().global_rank();
  const int world_size = context.world().world_size();
  absl::StatusOr<ringmaster::engine::TrainerConfig> config =
      ringmaster::engine::TrainerConfigFromSpec(context.spec());
  if (!config.ok()) return {Fail(config.status(), config.status().code() == absl::StatusCode::kInvalidArgument)};
  if (flags.threads > 0) config->threads = flags.threads;
  if (flags.device != "auto") {
    config->device = flags.device == "cuda" ? ringmaster::engine::Device::kCuda : ringmaster::engine::Device::kCpu;
  } else if (context.device().kind() != ringmaster::v1::RankDevice::KIND_UNSPECIFIED) {
    config->device = context.device().kind() == ringmaster::v1::RankDevice::CUDA ? ringmaster::engine::Device::kCuda
                                                                                  : ringmaster::engine::Device::kCpu;
  }
  config->device_index = ringmaster::engine::CudaOrdinal(context);
  config->data.root = context.data_root();  // opened beneath it (engine/data/data_file.h)
  // The data sets load while the rank joins its world (as long as the slowest
  // rank takes to start): a restart's ranks step sooner.
  std::shared_future<absl::StatusOr<ringmaster::engine::TrainingData>> data = data_sets->For(context, *config);
  std::unique_ptr<ringmaster::engine::dist::ProcessGroup> world;
  if (world_size > 1) {
    ringmaster::engine::JoinOptions join;
    join.timeout = absl::Seconds(flags.timeout_seconds);
    join.nccl = config->device == ringmaster::engine::Device::kCuda;
    join.device = config->device_index;
    join.gloo_interface = StringFlagOrEnv("", "RINGMASTER_GLOO_INTERFACE");
    absl::StatusOr<std::unique_ptr<ringmaster::engine::dist::ProcessGroup>> joined =
        ringmaster::engine::JoinWorld(context, join);
    if (!joined.ok()) return {Fail(joined.status())};
    world = std::move(*joined);
    spdlog::info("rank {} of {} (data {}, stage {}) joined through {}", rank, world_size, context.rank().data_rank(),
                 context.rank().pipeline_rank(), context.rendezvous().address());
  } else if (context.spec().parallelism().data() * context.spec().parallelism().pipeline() > 1) {
    spdlog::info("one process: training the global batch of {} on a single rank", config->data.global_batch);
  }
  const bool rank0 = rank == 0;
  // Started by a worker: report metrics and commit checkpoints through it.
  std::unique_ptr<ringmaster::engine::AgentClient> agent =
      ringmaster::engine::AgentClient::Connect(context, absl::Seconds(1));

  ringmaster::engine::ProgressPrinter progress(stdout, isatty(STDOUT_FILENO) != 0, config->log_interval_steps);
  ringmaster::engine::EvalReport last_eval;
  int64_t device_peak_bytes = 0;  // the caching allocator's (CUDA); 0 on the CPU
  ringmaster::engine::TrainerOptions options;
  options.checkpoint_dir = context.checkpoint_dir();
  options.checkpoint_roots.assign(context.checkpoint_roots().begin(), context.checkpoint_roots().end());
  options.auto_interval = context.auto_interval();
  options.preloaded_data = data;
  options.max_steps_this_run = flags.max_steps;
  options.world = world.get();
  options.coord = {context.rank().data_rank(), context.rank().pipeline_rank()};
  ringmaster::engine::StepMean step_mean(config->log_interval_steps);
  options.on_step = [&](const ringmaster::engine::StepReport& r) {
    device_peak_bytes = std::max(device_peak_bytes, r.device_memory_peak_bytes);
    if (rank0) progress.OnStep(r);
    if (agent) agent->ReportStep(step_mean.Add(r));  // times as means over the log interval
  };
  bool commit_refused = false;
  if (agent) {
    // Rank 0 gathers the whole model of every stage and writes it: one
    // whole-model commit completes the checkpoint, whatever the layout.
    // Called on the trainer's checkpoint writer thread; Run waits for it.
    options.on_checkpoint = [&](const ringmaster::engine::CheckpointReport& checkpoint) {
      absl::Status s = agent->CommitWholeModel(checkpoint, context.world().pipeline());
      commit_refused = s.code() == absl::StatusCode::kInvalidArgument;
      return s;
    };
    options.should_stop = [&] { return agent->stop_requested(); };
    options.checkpoint_requested = [&] { return agent->checkpoint_requested(); };
    // Only what the coordinator recorded as committed is resumed from.
    options.resume_from = context.has_resume_from() ? context.resume_from().path() : "";
    // ...and only as the coordinator recorded it at commit.
    if (context.has_resume_from()) {
      options.resume_recorded_files = ringmaster::engine::CommittedFiles(context.resume_from());
    }
    options.on_resume_damaged = [&](const absl::Status& damage) {
      if (absl::Status s = agent->ReportDamaged(context.resume_from(), std::string(damage.message())); !s.ok()) {
        spdlog::error("could not report the damaged checkpoint: {}", s.ToString());
      }
    };
  }
  options.on_eval = [&](const ringmaster::engine::EvalReport& r) {
    progress.OnEval(r);
    last_eval = r;
    if (agent) agent->ReportEval(r);
  };
  absl::StatusOr<std::unique_ptr<ringmaster::engine::Trainer>> trainer =
      ringmaster::engine::Trainer::Create(*config, options);
  // A spec the trainer rejects, or data it may not read (outside its data
  // root, through a link out of it, or the OS refuses it): no restart helps.
  if (!trainer.ok()) {
    return {Fail(trainer.status(), trainer.status().code() == absl::StatusCode::kInvalidArgument ||
                                       trainer.status().code() == absl::StatusCode::kPermissionDenied)};
  }
  absl::Status run = (*trainer)->Run();
  progress.Finish();
  // Its world broke (a peer died: Gloo's UNAVAILABLE) or the worker stopped
  // it mid-run (CANCELLED at the next step): on the CPU, ask to carry on in
  // the next generation in this process. Its state is rolled back to the
  // checkpoint all the same: the trainer and the world go, the data sets stay.
  const bool world_broke = run.code() == absl::StatusCode::kUnavailable;
  const bool stopped = run.code() == absl::StatusCode::kCancelled && agent && agent->stop_requested();
  if (agent && world && config->device == ringmaster::engine::Device::kCpu && (world_broke || stopped)) {
    spdlog::warn("generation {} of job {} ended for this rank at step {} ({}): asking to carry on in the next one",
                 context.generation(), context.job_id(), (*trainer)->step(), std::string(run.message()));
    trainer->reset();  // before the world it uses
    world.reset();
    absl::StatusOr<std::string> next = agent->AwaitRejoin(kRejoinWait);
    if (next.ok()) return {0, *std::move(next)};
    spdlog::info("not carried on: {}", std::string(next.status().message()));
  }
  if (!run.ok()) return {Fail(run, commit_refused)};
  if (!rank0) {
    spdlog::info("rank {} finished at step {}", rank, (*trainer)->step());
    return {0};
  }
  // This rank's peak tensor memory, what `ringmaster plan` predicts: the
  // caching allocator's on a GPU, the host tensors' on the CPU.
  std::printf("peak_memory_bytes=%lld\n",
              static_cast<long long>(device_peak_bytes > 0 ? device_peak_bytes
                                                           : ringmaster::engine::HostTensorMemoryStats().peak_bytes));
  if ((*trainer)->step() < (*trainer)->total_steps()) {
    std::printf("stopped at step %lld of %lld\n", static_cast<long long>((*trainer)->step()),
                static_cast<long long>((*trainer)->total_steps()));
    return {0};
  }
  if (last_eval.accuracy >= 0) {
    std::printf("test_accuracy=%.4f\n", last_eval.accuracy);
  } else {
    std::printf("test_loss=%.4f\n", last_eval.loss);
  }
  return {0};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringmaster-trainer: train a job spec in this process"};
  ringmaster::CommonFlags common;
  ringmaster::AddCommonFlags(app, &common);
  HandFlags hand;
  std::string context_path;
  RankFlags flags;
  int nproc = 1;
  app.add_option("--rank-context", context_path,
                 "The rank context its worker wrote (proto/rank_context.proto as JSON); replaces --spec and the "
                 "rank flags");
  app.add_option("--spec", hand.spec_path, "Job spec (YAML or JSON)");
  app.add_option("--set", hand.overrides, "Override a spec field: --set optimizer.lr=0.1 (repeatable)");
  app.add_option("--checkpoint-dir", hand.checkpoint_dir,
                 "Write checkpoints here and resume from the newest good one (default: the spec's "
                 "checkpoint.directory; none if both are empty)");
  app.add_option("--threads", flags.threads, "CPU threads (default: resources.cpus_per_rank)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", flags.device, "cpu, cuda, or auto: the spec's resources.device")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--max-steps", flags.max_steps, "Stop after this many steps of this run (resume later)");
  app.add_option("--nproc", nproc, "Start N local ranks of this job (data x pipeline = N)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--rank", hand.rank, "This rank (default: RINGMASTER_RANK, else 0)")->check(CLI::NonNegativeNumber);
  app.add_option("--world-size", hand.world_size, "Ranks in the job (default: RINGMASTER_WORLD_SIZE, else 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--local-rank", hand.local_rank,
                 "Rank on this node (default: RINGMASTER_LOCAL_RANK, else the rank)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rendezvous", hand.rendezvous, "file:DIR or tcp:HOST:PORT (default: RINGMASTER_RENDEZVOUS)");
  app.add_option("--timeout", flags.timeout_seconds, "Seconds a rank waits for its peers in a collective before failing")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (nproc > 1 && std::getenv("RINGMASTER_RANK") == nullptr) return LaunchLocalRanks(nproc, argc, argv);
  if (!context_path.empty() && (!hand.spec_path.empty() || !hand.overrides.empty())) {
    return Fail(absl::InvalidArgumentError("--rank-context: the context holds the spec; drop --spec and --set"), true);
  }

  absl::StatusOr<RankContext> context =
      context_path.empty() ? HandStartContext(hand) : ringmaster::engine::ReadRankContext(context_path);
  if (!context.ok()) return Fail(context.status(), context.status().code() == absl::StatusCode::kInvalidArgument);
  if (absl::Status s = ringmaster::SetupLoggingFromFlags(common, LogComponent(*context)); !s.ok()) return Fail(s);
  // SIGUSR1 (sent by the worker before it stops a rank): state dump to the log.
  if (absl::Status s = ringmaster::engine::InstallStateDumpHandler(STDERR_FILENO); !s.ok()) return Fail(s);

  DataSets data_sets;
  RankContext current = *std::move(context);
  for (;;) {
    GenerationEnd end = RunGeneration(current, flags, &data_sets);
    if (end.next_context.empty()) return end.exit_code;
    absl::StatusOr<RankContext> next = ringmaster::engine::ReadRankContext(end.next_context);
    if (!next.ok()) return Fail(next.status());
    spdlog::info("carrying on in this process as rank {} of generation {} of job {} (data sets kept)",
                 next->rank().global_rank(), next->generation(), next->job_id());
    // Its lines name the rank it is now.
    if (absl::Status s = ringmaster::SetupLoggingFromFlags(common, LogComponent(*next)); !s.ok()) return Fail(s);
    current = *std::move(next);
  }
}
