// Step time of the trainer on CUDA with and without CUDA graphs, on small
// models (where kernel launches are a large part of a step). One line per
// model and mode, e.g.
//   model=mlp batch=64 cuda_graphs=on steps=200 ms_per_step=0.41 samples_per_s=156000
// Needs a GPU: without one it prints "SKIP: ..." and exits 0 (as the other
// GPU benches do); any other failure exits 1. bazel run //engine/train:trainer_graph_bench
#include <chrono>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "engine/train/backend_factory.h"
#include "engine/train/trainer.h"

namespace ringmaster::engine {
namespace {

int Bench(const std::string& model, int64_t batch, int steps, CudaGraphMode mode) {
  TrainerConfig c;
  c.name = "graph-bench";
  c.device = Device::kCuda;
  c.model.kind = model == "cnn" ? nn::ModelKind::kCnn : model == "gpt" ? nn::ModelKind::kGpt : nn::ModelKind::kMlp;
  c.model.seed = 1;
  c.model.n_layer = 2;
  c.model.n_embd = 64;
  c.model.n_head = 4;
  c.model.block_size = 64;
  c.data.kind = DatasetKind::kSynthetic;
  c.data.synthetic_samples = 8192;
  c.data.global_batch = batch;
  c.optimizer.kind = optim::OptimizerKind::kAdamW;
  c.optimizer.lr = 1e-3f;
  c.schedule.base_lr = 1e-3f;
  c.steps = steps;
  c.log_interval_steps = 50;
  c.eval_interval_steps = 1000000;
  c.cuda_graphs = mode;
  constexpr int64_t kWarmup = 10;  // eager warm-ups and the capture
  double seconds = 0.0;
  TrainerOptions options;
  options.on_step = [&](const StepReport& r) {
    if (r.step > kWarmup) seconds += r.seconds;
  };
  options.max_steps_this_run = steps;  // no final evaluation
  auto trainer = Trainer::Create(c, options);
  if (!trainer.ok()) {
    std::fprintf(stderr, "%s\n", trainer.status().ToString().c_str());
    return 1;
  }
  absl::Status s = (*trainer)->Run();
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const double per_step = seconds / static_cast<double>(steps - kWarmup);
  std::printf("model=%s batch=%lld cuda_graphs=%s graphed=%d steps=%d ms_per_step=%.3f samples_per_s=%.0f\n",
              model.c_str(), static_cast<long long>(batch), mode == CudaGraphMode::kOn ? "on" : "off",
              (*trainer)->step_graphed() ? 1 : 0, steps - static_cast<int>(kWarmup), 1e3 * per_step,
              static_cast<double>(batch) / per_step);
  return 0;
}

}  // namespace
}  // namespace ringmaster::engine

int main(int argc, char** argv) {
  CLI::App app{"trainer step time with and without CUDA graphs"};
  int64_t batch = 64;
  int steps = 200;
  app.add_option("--batch", batch, "global batch");
  app.add_option("--steps", steps, "steps per run (the first 10 are not timed)")->check(CLI::Range(20, 1000000));
  CLI11_PARSE(app, argc, argv);
  ringmaster::engine::TrainerConfig probe;
  probe.device = ringmaster::engine::Device::kCuda;
  if (absl::StatusOr<std::unique_ptr<ringmaster::engine::Backend>> backend =
          ringmaster::engine::CreateBackend(probe);
      !backend.ok()) {
    std::printf("SKIP: %s: nothing to benchmark\n", backend.status().ToString().c_str());
    return absl::IsFailedPrecondition(backend.status()) ? 0 : 1;
  }
  int rc = 0;
  for (const char* model : {"mlp", "cnn", "gpt"}) {
    for (auto mode : {ringmaster::engine::CudaGraphMode::kOff, ringmaster::engine::CudaGraphMode::kOn}) {
      rc |= ringmaster::engine::Bench(model, batch, steps, mode);
    }
  }
  return rc;
}
