// `ringmaster plan` against the trainer: for each spec (default: the three
// CPU examples, on synthetic data of the same shapes), the plan's step time
// and peak memory per rank beside the measured ones. The ranks run as threads
// of this process (the spec's layout), one CPU thread each. One line per spec:
//   spec=examples/gpt_text.yaml ranks=2 predicted_step_ms=41.2 measured_step_ms=97.0
//     achieved_mfu=0.170 predicted_peak_mb=57.1 measured_peak_mb=55.2
// bazel run -c opt //bench:plan_bench -- [--steps 30] [SPEC ...]
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/spec.h"
#include "engine/dist/in_process_group.h"
#include "engine/plan/plan.h"
#include "engine/train/trainer.h"

namespace ringmaster::engine {
namespace {

int Bench(const std::string& path, int steps, int warmup) {
  auto spec = LoadJobSpecFile(path, {"data.dataset=synthetic", "data.path=", "data.synthetic_samples=65536",
                                     "training.steps=100000", "checkpoint.interval_steps=0"});
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", std::string(spec.status().message()).c_str());
    return 1;
  }
  auto config = TrainerConfigFromSpec(*spec);
  auto device = plan::FindDevice("cpu");
  auto predicted = plan::PlanJobSpec(*spec, *device, {});
  if (!config.ok() || !predicted.ok()) {
    std::fprintf(stderr, "%s\n", std::string((config.ok() ? predicted.status() : config.status()).message()).c_str());
    return 1;
  }
  const int ranks = predicted->ranks;
  config->threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks);
  auto world = dist::InProcessWorld::Create(ranks, {"plan-bench", absl::Seconds(300)});
  const int64_t before = HostTensorMemoryStats().live_bytes;
  ResetHostTensorPeak();
  std::vector<double> seconds;  // rank 0's steps after the warm-up
  std::vector<std::thread> threads;
  bool failed = false;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
      TrainerOptions options;
      options.world = group.get();
      options.coord = {r / config->parallel.pipeline, r % config->parallel.pipeline};
      options.max_steps_this_run = warmup + steps;
      if (r == 0) {
        options.on_step = [&](const StepReport& report) {
          if (report.step > warmup) seconds.push_back(report.seconds);
        };
      }
      auto trainer = Trainer::Create(*config, options);
      absl::Status s = trainer.ok() ? (*trainer)->Run() : trainer.status();
      if (!s.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, std::string(s.message()).c_str());
        failed = true;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (failed || seconds.empty()) return 1;
  std::sort(seconds.begin(), seconds.end());
  const double measured = seconds[seconds.size() / 2];
  const double peak = static_cast<double>(HostTensorMemoryStats().peak_bytes - before) / ranks;
  std::printf(
      "spec=%s ranks=%d threads_per_rank=%d predicted_step_ms=%.1f measured_step_ms=%.1f achieved_mfu=%.3f "
      "predicted_peak_mb=%.1f measured_peak_mb=%.1f\n",
      path.c_str(), ranks, config->threads, predicted->step_seconds * 1e3, measured * 1e3,
      predicted->flops_per_step / ranks / measured / predicted->peak_flops, predicted->peak_bytes / 1e6, peak / 1e6);
  return 0;
}

}  // namespace
}  // namespace ringmaster::engine

int main(int argc, char** argv) {
  CLI::App app{"The plan's step time and peak memory against the trainer's, on the CPU"};
  std::vector<std::string> specs = {"examples/fashion_mnist_mlp.yaml", "examples/fashion_mnist_cnn.yaml",
                                    "examples/gpt_text.yaml"};
  int steps = 30, warmup = 5;
  app.add_option("specs", specs, "Job spec files")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps first")->check(CLI::Range(0, 100000))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  int rc = 0;
  for (const std::string& spec : specs) rc |= ringmaster::engine::Bench(spec, steps, warmup);
  return rc;
}
