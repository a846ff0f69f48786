// Training stall per checkpoint: a synchronous save (gather, write, fsync:
// training waits for all of it) against the background writer (training
// waits for the host snapshot only), for the GPT example's model and a larger
// one. One process, the example's global batch shrunk for the larger model,
// synthetic tokens; both modes in one invocation, alternating, on the same
// machine. Prints one row per model and mode, then the ratio:
//   model=gpt_text params=826112 checkpoint_mb=9.9 mode=sync checkpoints=4 stall_ms_median=41.2 ...
//   model=gpt_text stall_ratio=0.051 (async stall / sync save, medians)
// bazel run -c opt //bench:checkpoint_stall_bench -- [--checkpoints 4 --interval 5 --dir /tmp/x]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/spec.h"
#include "common/status_macros.h"
#include "engine/train/trainer.h"
#include "engine/train/trainer_config.h"

namespace ringmaster::engine {
namespace {

struct Model {
  std::string name;
  std::vector<std::string> overrides;
};

struct ModeResult {
  std::vector<double> stall;  // per checkpoint, seconds
  std::vector<double> write;  // per checkpoint, seconds (background for async)
  double run_seconds = 0;
  int64_t params = 0;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int64_t DirectoryBytes(const std::string& dir) {
  int64_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) bytes += static_cast<int64_t>(entry.file_size());
  return bytes;
}

absl::StatusOr<ModeResult> RunMode(const TrainerConfig& config, bool async, const std::string& dir) {
  std::filesystem::remove_all(dir);
  ModeResult result;
  TrainerOptions options;
  options.checkpoint_dir = dir;
  options.async_checkpoints = async;
  options.on_checkpoint = [&](const CheckpointReport& c) {
    result.stall.push_back(c.stall_seconds);  // the writer's thread; read after Run
    result.write.push_back(c.write_seconds);
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(config, options));
  result.params = trainer->model().NumParameters();
  const auto began = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(trainer->Run());
  result.run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  return result;
}

void PrintRow(const std::string& model, const char* mode, const ModeResult& r, double checkpoint_mb, int64_t steps) {
  std::printf(
      "model=%s params=%lld checkpoint_mb=%.1f mode=%s checkpoints=%zu stall_ms_median=%.1f stall_ms_max=%.1f "
      "write_ms_median=%.1f run_s=%.2f steps_per_s=%.2f\n",
      model.c_str(), static_cast<long long>(r.params), checkpoint_mb, mode, r.stall.size(), 1e3 * Median(r.stall),
      r.stall.empty() ? 0.0 : 1e3 * *std::max_element(r.stall.begin(), r.stall.end()), 1e3 * Median(r.write),
      r.run_seconds, steps / r.run_seconds);
}

int Bench(const std::string& spec_path, const Model& model, int checkpoints, int interval, const std::string& dir) {
  std::vector<std::string> overrides = {"data.dataset=synthetic", "data.path=", "data.synthetic_samples=4096",
                                        "training.eval_interval_steps=100000",
                                        "training.steps=" + std::to_string(checkpoints * interval),
                                        "checkpoint.interval_steps=" + std::to_string(interval), "checkpoint.keep=2"};
  overrides.insert(overrides.end(), model.overrides.begin(), model.overrides.end());
  absl::StatusOr<v1::JobSpec> spec = LoadJobSpecFile(spec_path, overrides);
  absl::StatusOr<TrainerConfig> config = spec.ok() ? TrainerConfigFromSpec(*spec) : spec.status();
  if (!config.ok()) {
    std::fprintf(stderr, "%s: %s\n", model.name.c_str(), std::string(config.status().message()).c_str());
    return 1;
  }
  config->threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ModeResult sync, async;
  // Alternating, so that both see the same machine: sync, async, sync, async.
  for (int round = 0; round < 2; ++round) {
    for (bool mode : {false, true}) {
      absl::StatusOr<ModeResult> r = RunMode(*config, mode, dir + (mode ? "/async" : "/sync"));
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", model.name.c_str(), r.status().ToString().c_str());
        return 1;
      }
      ModeResult& into = mode ? async : sync;
      into.params = r->params;
      into.run_seconds += r->run_seconds;
      into.stall.insert(into.stall.end(), r->stall.begin(), r->stall.end());
      into.write.insert(into.write.end(), r->write.begin(), r->write.end());
    }
  }
  const std::string one = dir + "/sync/" + std::filesystem::directory_iterator(dir + "/sync")->path().filename().string();
  const double checkpoint_mb = DirectoryBytes(one) / 1e6;
  const int64_t steps = 2LL * checkpoints * interval;
  PrintRow(model.name, "sync", sync, checkpoint_mb, steps);
  PrintRow(model.name, "async", async, checkpoint_mb, steps);
  std::printf("model=%s stall_ratio=%.3f (async stall / sync save, medians)\n", model.name.c_str(),
              Median(async.stall) / Median(sync.stall));
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace ringmaster::engine

int main(int argc, char** argv) {
  CLI::App app{"Training stall per checkpoint: synchronous save against the background writer"};
  std::string spec = "examples/gpt_text.yaml";
  int checkpoints = 4;
  int interval = 5;
  bool small = false;
  std::string dir = std::filesystem::temp_directory_path().string() + "/checkpoint_stall_bench." +
                    std::to_string(::getpid());
  app.add_option("--spec", spec, "The GPT example's spec")->capture_default_str();
  app.add_option("--checkpoints", checkpoints, "Checkpoints per run")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--interval", interval, "Steps between checkpoints")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--dir", dir, "Scratch checkpoint directory (removed after)")->capture_default_str();
  app.add_flag("--small", small, "The example's model only (the test suite's smoke run)");
  CLI11_PARSE(app, argc, argv);
  std::vector<ringmaster::engine::Model> models = {{"gpt_text", {}}};
  // About 14 M parameters (170 MB with AdamW's state): the global batch cut
  // to 4 sequences so that a step stays short on a CPU.
  if (!small) {
    models.push_back({"gpt_8x384", {"model.gpt.layers=8", "model.gpt.width=384", "model.gpt.heads=6",
                                    "data.batch_size=4"}});
  }
  for (const auto& model : models) {
    if (int rc = ringmaster::engine::Bench(spec, model, checkpoints, interval, dir); rc != 0) return rc;
  }
  return 0;
}
