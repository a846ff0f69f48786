// ringmaster-trainer: trains one job spec in this process.
//
//   ringmaster-trainer --spec FILE [--set key=value ...] [--checkpoint-dir DIR]
//
// Resumes from the newest good checkpoint in DIR, shows a live progress line,
// evaluates on the held-out data, and for classifiers prints
// `test_accuracy=0.XXXX` as its last line.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/cli_flags.h"
#include "common/spec.h"
#include "engine/train/progress.h"
#include "engine/train/trainer.h"
#include "engine/train/trainer_config.h"
#include "spdlog/spdlog.h"

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ringmaster-trainer: %s\n", std::string(status.message()).c_str());
  return 1;
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
  int64_t max_steps = -1;
  app.add_option("--spec", spec_path, "Job spec (YAML or JSON)")->required();
  app.add_option("--set", overrides, "Override a spec field: --set optimizer.lr=0.1 (repeatable)");
  app.add_option("--checkpoint-dir", checkpoint_dir,
                 "Write checkpoints here and resume from the newest good one (default: the spec's "
                 "checkpoint.directory; none if both are empty)");
  app.add_option("--threads", threads, "CPU threads (default: resources.cpus_per_rank)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-steps", max_steps, "Stop after this many steps of this run (resume later)");
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s = ringmaster::SetupLoggingFromFlags(common, "trainer"); !s.ok()) return Fail(s);

  absl::StatusOr<ringmaster::v1::JobSpec> spec = ringmaster::LoadJobSpecFile(spec_path, overrides);
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<ringmaster::engine::TrainerConfig> config = ringmaster::engine::TrainerConfigFromSpec(*spec);
  if (!config.ok()) return Fail(config.status());
  if (threads > 0) config->threads = threads;
  if (spec->parallelism().data() * spec->parallelism().pipeline() > 1) {
    spdlog::info("one process: training the global batch of {} on a single rank", config->data.global_batch);
  }

  ringmaster::engine::ProgressPrinter progress(stdout, isatty(STDOUT_FILENO) != 0, config->log_interval_steps);
  ringmaster::engine::EvalReport last_eval;
  ringmaster::engine::TrainerOptions options;
  options.checkpoint_dir = checkpoint_dir.empty() ? spec->checkpoint().directory() : checkpoint_dir;
  options.max_steps_this_run = max_steps;
  options.on_step = [&](const ringmaster::engine::StepReport& r) { progress.OnStep(r); };
  options.on_eval = [&](const ringmaster::engine::EvalReport& r) {
    progress.OnEval(r);
    last_eval = r;
  };
  absl::StatusOr<std::unique_ptr<ringmaster::engine::Trainer>> trainer =
      ringmaster::engine::Trainer::Create(*config, options);
  if (!trainer.ok()) return Fail(trainer.status());
  absl::Status run = (*trainer)->Run();
  progress.Finish();
  if (!run.ok()) return Fail(run);
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
