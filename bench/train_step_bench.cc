// Training-step throughput of the engine's CPU backend on the Fashion-MNIST MLP
// and CNN: forward, softmax cross-entropy, backward and an SGD-momentum update
// per step, on a fixed random batch. Prints one line per model:
//   model=cnn batch=64 threads=2 steps=30 samples_per_s=812.4 ms_per_step=78.8
// bench/cpu_vs_pytorch.sh runs it beside bench/reference/train_step_bench.py.
#include <chrono>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "engine/core/cpu_backend.h"
#include "engine/data/image_dataset.h"
#include "engine/nn/loss.h"
#include "engine/nn/model_factory.h"
#include "engine/optim/optimizer.h"

namespace ringmaster::engine {
namespace {

int Bench(const std::string& model_name, int64_t batch, int threads, int steps, int warmup) {
  CpuBackendConfig backend_config;
  backend_config.num_threads = threads;
  CpuBackend backend(backend_config);
  nn::ModelConfig config;
  config.kind = model_name == "cnn" ? nn::ModelKind::kCnn : nn::ModelKind::kMlp;
  config.seed = 1;
  auto model = nn::BuildModel(config, backend);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  nn::SoftmaxCrossEntropy loss(backend);
  optim::OptimizerConfig opt_config;
  opt_config.kind = optim::OptimizerKind::kSgd;
  opt_config.momentum = 0.9f;
  auto opt = optim::Optimizer::Create(opt_config, (*model)->Parameters());
  if (!opt.ok()) return 1;

  SyntheticImageDataset data(batch, /*seed=*/2);
  Batch b = data.NewBatch(batch);
  for (int64_t i = 0; i < batch; ++i) data.Get(i, i, &b);

  auto step = [&]() -> bool {
    auto logits = (*model)->Forward(b.images, true);
    if (!logits.ok()) return false;
    auto l = loss.Forward(*logits, b.targets, true);
    auto dlogits = loss.Backward();
    if (!l.ok() || !dlogits.ok() || !(*model)->Backward(*dlogits).ok()) return false;
    if (!(*opt)->Step(0.01f, 1.0f).ok()) return false;
    (*opt)->ZeroGrad();
    return true;
  };
  for (int i = 0; i < warmup; ++i) {
    if (!step()) return 1;
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) {
    if (!step()) return 1;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("model=%s batch=%lld threads=%d steps=%d samples_per_s=%.1f ms_per_step=%.2f\n", model_name.c_str(),
              static_cast<long long>(batch), threads, steps, batch * steps / seconds, 1000.0 * seconds / steps);
  return 0;
}

}  // namespace
}  // namespace ringmaster::engine

int main(int argc, char** argv) {
  CLI::App app{"Training-step throughput of the CPU backend (MLP and CNN)"};
  std::string model = "both";
  int64_t batch = 64;
  int threads = 2;
  int steps = 30;
  int warmup = 5;
  app.add_option("--model", model, "mlp, cnn or both")->check(CLI::IsMember({"mlp", "cnn", "both"}));
  app.add_option("--batch", batch, "Samples per step")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU threads")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "Timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "Untimed steps first")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  int rc = 0;
  if (model != "cnn") rc |= ringmaster::engine::Bench("mlp", batch, threads, steps * 10, warmup);
  if (model != "mlp") rc |= ringmaster::engine::Bench("cnn", batch, threads, steps, warmup);
  return rc;
}
