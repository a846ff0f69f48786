// ringmaster-trainer: trains one job spec.
//
//   ringmaster-trainer --spec FILE [--set key=value ...] [--checkpoint-dir DIR]
//   ringmaster-trainer --spec FILE --nproc N ...      N local ranks (data x pipeline)
//   ringmaster-trainer --spec FILE --rank R --world-size N --rendezvous file:DIR|tcp:HOST:PORT
//
// Resumes from the newest good checkpoint in DIR, shows a live progress line
// (rank 0), evaluates on the held-out data, and for classifiers prints
// `test_accuracy=0.XXXX` as its last line. With --nproc, it starts N ranks of
// itself (engine/train/launcher.h); a rank that fails stops the others. A rank
// takes its rank, world size, local rank and rendezvous from the flags or from
// RINGMASTER_RANK, RINGMASTER_WORLD_SIZE, RINGMASTER_LOCAL_RANK and
// RINGMASTER_RENDEZVOUS.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/cli_flags.h"
#include "common/spec.h"
#include "engine/train/agent_client.h"
#include "engine/train/state_dump.h"
#include "engine/train/launcher.h"
#include "engine/train/progress.h"
#include "engine/train/rank_env.h"
#include "engine/train/trainer.h"
#include "engine/train/trainer_config.h"
#include "spdlog/spdlog.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ringmaster-trainer: %s\n", std::string(status.message()).c_str());
  return 1;
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringmaster-trainer: train a job spec in this process"};
  ringmaster::CommonFlags common;
  ringmaster::AddCommonFlags(app, &common);
  std::string spec_path;
  std::vector<std::string> overrides;
  std::string checkpoint_dir;
  int threads = 0;
  std::string device = "auto";
  int64_t max_steps = -1;
  int nproc = 1;
  int rank = -1, world_size = 0, local_rank = -1;
  std::string rendezvous;
  double timeout_seconds = 300;
  app.add_option("--spec", spec_path, "Job spec (YAML or JSON)")->required();
  app.add_option("--set", overrides, "Override a spec field: --set optimizer.lr=0.1 (repeatable)");
  app.add_option("--checkpoint-dir", checkpoint_dir,
                 "Write checkpoints here and resume from the newest good one (default: the spec's "
                 "checkpoint.directory; none if both are empty)");
  app.add_option("--threads", threads, "CPU threads (default: resources.cpus_per_rank)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", device, "cpu, cuda, or auto: the spec's resources.device")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--max-steps", max_steps, "Stop after this many steps of this run (resume later)");
  app.add_option("--nproc", nproc, "Start N local ranks of this job (data x pipeline = N)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--rank", rank, "This rank (default: RINGMASTER_RANK, else 0)")->check(CLI::NonNegativeNumber);
  app.add_option("--world-size", world_size, "Ranks in the job (default: RINGMASTER_WORLD_SIZE, else 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--local-rank", local_rank, "Rank on this node (default: RINGMASTER_LOCAL_RANK, else the rank)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rendezvous", rendezvous, "file:DIR or tcp:HOST:PORT (default: RINGMASTER_RENDEZVOUS)");
  app.add_option("--timeout", timeout_seconds,
                 "Seconds a rank waits for its peers in a collective before failing")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (nproc > 1 && std::getenv("RINGMASTER_RANK") == nullptr) return LaunchLocalRanks(nproc, argc, argv);

  absl::StatusOr<ringmaster::engine::RankEnv> env =
      ringmaster::engine::ResolveRankEnv(rank, world_size, local_rank, rendezvous);
  if (!env.ok()) return Fail(env.status());
  std::string component = env->world_size > 1 ? "trainer r" + std::to_string(env->rank) : "trainer";
  if (absl::Status s = ringmaster::SetupLoggingFromFlags(common, component); !s.ok()) return Fail(s);
  // SIGUSR1 (sent by the worker before it stops a rank): state dump to the log.
  if (absl::Status s = ringmaster::engine::InstallStateDumpHandler(STDERR_FILENO); !s.ok()) return Fail(s);

  absl::StatusOr<ringmaster::v1::JobSpec> spec = ringmaster::LoadJobSpecFile(spec_path, overrides);
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<ringmaster::engine::TrainerConfig> config = ringmaster::engine::TrainerConfigFromSpec(*spec);
  if (!config.ok()) return Fail(config.status());
  if (threads > 0) config->threads = threads;
  if (device != "auto") config->device = device == "cuda" ? ringmaster::engine::Device::kCuda
                                                           : ringmaster::engine::Device::kCpu;
  // A worker pins this rank's GPU through CUDA_VISIBLE_DEVICES (one UUID):
  // it is device 0. Otherwise (--nproc, hand-started ranks) the local rank.
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const bool one_visible = visible != nullptr && *visible != '\0' && std::strchr(visible, ',') == nullptr;
  config->device_index = one_visible ? 0 : env->local_rank;
  std::unique_ptr<ringmaster::engine::dist::ProcessGroup> world;
  if (env->world_size > 1) {
    absl::StatusOr<std::unique_ptr<ringmaster::engine::dist::ProcessGroup>> joined =
        ringmaster::engine::JoinWorld(*env, absl::Seconds(timeout_seconds),
                                      {config->device == ringmaster::engine::Device::kCuda, config->device_index});
    if (!joined.ok()) return Fail(joined.status());
    world = std::move(*joined);
    spdlog::info("rank {} of {} (local rank {}) joined through {}", env->rank, env->world_size, env->local_rank,
                 env->rendezvous);
  } else if (spec->parallelism().data() * spec->parallelism().pipeline() > 1) {
    spdlog::info("one process: training the global batch of {} on a single rank", config->data.global_batch);
  }
  const bool rank0 = env->rank == 0;
  // Started by a worker: report metrics and commit checkpoints through it.
  absl::StatusOr<std::unique_ptr<ringmaster::engine::AgentClient>> agent =
      ringmaster::engine::AgentClient::FromEnv(env->rank, absl::Seconds(1));
  if (!agent.ok()) return Fail(agent.status());

  ringmaster::engine::ProgressPrinter progress(stdout, isatty(STDOUT_FILENO) != 0, config->log_interval_steps);
  ringmaster::engine::EvalReport last_eval;
  ringmaster::engine::TrainerOptions options;
  options.checkpoint_dir = checkpoint_dir.empty() ? spec->checkpoint().directory() : checkpoint_dir;
  options.max_steps_this_run = max_steps;
  options.world = world.get();
  options.on_step = [&](const ringmaster::engine::StepReport& r) {
    if (rank0) progress.OnStep(r);
    if (*agent) (*agent)->ReportStep(r);
  };
  if (*agent) {
    options.on_checkpoint = [&](int64_t step, const std::string& path) {
      return (*agent)->CommitCheckpoint(step, path, /*stage=*/0, /*stages=*/1);  // rank 0 writes the whole model
    };
    options.should_stop = [&] { return (*agent)->stop_requested(); };
    // Only what the coordinator recorded as committed is resumed from.
    const char* resume_from = std::getenv("RINGMASTER_RESUME_FROM");
    options.resume_from = resume_from != nullptr ? resume_from : "";
  }
  options.on_eval = [&](const ringmaster::engine::EvalReport& r) {
    progress.OnEval(r);
    last_eval = r;
    if (*agent) (*agent)->ReportEval(r);
  };
  absl::StatusOr<std::unique_ptr<ringmaster::engine::Trainer>> trainer =
      ringmaster::engine::Trainer::Create(*config, options);
  if (!trainer.ok()) return Fail(trainer.status());
  absl::Status run = (*trainer)->Run();
  progress.Finish();
  if (!run.ok()) return Fail(run);
  if (!rank0) {
    spdlog::info("rank {} finished at step {}", env->rank, (*trainer)->step());
    return 0;
  }
  if ((*trainer)->step() < (*trainer)->total_steps()) {
    std::printf("stopped at step %lld of %lld\n", static_cast<long long>((*trainer)->step()),
                static_cast<long long>((*trainer)->total_steps()));
    return 0;
  }
  if (last_eval.accuracy >= 0) {
    std::printf("test_accuracy=%.4f\n", last_eval.accuracy);
  } else {
    std::printf("test_loss=%.4f\n", last_eval.loss);
  }
  return 0;
}
