// GPU tests of the trainer's CUDA-graph step (step_graph_runner.h), its pinned
// batch staging and its optimizer state in the caching allocator: a graphed
// run gives the eager run's losses and weights (fp32 rounding: relative 1e-5)
// and is not slower. With a 16-bit compute dtype the captured step also holds
// the 16-bit activations, the conversion of the input batch into them and the
// refresh of the weights' operand copies after the update (a copy left stale
// would make the next step's forward differ from the eager run's). And
// checkpoints snapshotted into pinned host memory and written in the
// background. Skipped without a device.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_test_util.h"
#include "engine/optim/optimizer.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

#define SKIP_WITHOUT_DEVICE() \
  if (!testing::HaveDevice()) GTEST_SKIP() << "no CUDA device present: graphed training steps not exercised"

// A small MLP with AdamW, warm-up and cosine decay (the learning rate and the
// Adam step change every step: both must come from the control block).
TrainerConfig MlpConfig() {
  TrainerConfig c;
  c.name = "graph-mlp";
  c.device = Device::kCuda;
  c.model.kind = nn::ModelKind::kMlp;
  c.model.seed = 11;
  c.model.hidden_sizes = {64, 32};
  c.data.kind = DatasetKind::kSynthetic;
  c.data.synthetic_samples = 1024;
  c.data.global_batch = 32;
  c.data.seed = 5;
  c.optimizer.kind = optim::OptimizerKind::kAdamW;
  c.optimizer.lr = 1e-3f;
  c.optimizer.weight_decay = 0.01f;
  c.schedule.base_lr = 1e-3f;
  c.schedule.warmup_steps = 4;
  c.schedule.decay = optim::LrDecay::kCosine;
  c.schedule.decay_steps = 40;
  c.grad_clip_norm = 1.0f;
  c.steps = 40;
  c.log_interval_steps = 1;  // every step's loss read back
  c.eval_interval_steps = 1000;
  return c;
}

// A CNN (BatchNorm, convolutions) with SGD-Nesterov.
TrainerConfig CnnConfig() {
  TrainerConfig c = MlpConfig();
  c.name = "graph-cnn";
  c.model.kind = nn::ModelKind::kCnn;
  c.model.conv_channels = {4, 8};
  c.model.cnn_hidden_sizes = {16};
  c.optimizer.kind = optim::OptimizerKind::kSgd;
  c.optimizer.lr = 0.05f;
  c.optimizer.momentum = 0.9f;
  c.optimizer.nesterov = true;
  c.schedule.base_lr = 0.05f;
  return c;
}

// fp16 with a loss scale that grows within the run (a new capture per scale).
TrainerConfig MlpFp16Config() {
  TrainerConfig c = MlpConfig();
  c.name = "graph-mlp-fp16";
  c.compute_dtype = DType::kF16;
  c.loss_scaler.enabled = true;
  c.loss_scaler.initial_scale = 1024.0f;
  c.loss_scaler.growth_interval = 7;
  return c;
}

// A CNN in bf16: 16-bit activations through convolutions (whose filter
// gradient goes through 16-bit scratch) and BatchNorm (run on widened f32
// copies), operand copies of the conv and linear weights.
TrainerConfig CnnBf16Config() {
  TrainerConfig c = CnnConfig();
  c.name = "graph-cnn-bf16";
  c.compute_dtype = DType::kBF16;
  return c;
}

struct RunResult {
  std::vector<float> losses;
  std::vector<float> scales;
  std::vector<std::vector<float>> weights;
  double seconds_after_warmup = 0.0;  // steps 6..end (past the warm-ups and the capture)
  bool graphed = false;
};

RunResult Train(TrainerConfig config, CudaGraphMode mode) {
  config.cuda_graphs = mode;
  RunResult result;
  TrainerOptions options;
  options.on_step = [&](const StepReport& r) {
    result.losses.push_back(r.loss);
    result.scales.push_back(r.loss_scale);
    if (r.step > 5) result.seconds_after_warmup += r.seconds;
  };
  auto trainer = Trainer::Create(config, options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return result;
  absl::Status s = (*trainer)->Run();
  EXPECT_TRUE(s.ok()) << s;
  result.graphed = (*trainer)->step_graphed();
  for (Parameter* p : (*trainer)->model().Parameters()) {
    std::vector<float> host(p->value.numel());
    EXPECT_EQ(cudaMemcpy(host.data(), p->value.raw(), p->value.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    result.weights.push_back(std::move(host));
  }
  return result;
}

// check_speed: a run that recaptures often (a changing loss scale) pays for
// its captures, so only the others must not be slower.
void ExpectGraphedMatchesEager(const TrainerConfig& config, bool check_speed = true) {
  RunResult eager = Train(config, CudaGraphMode::kOff);
  RunResult graphed = Train(config, CudaGraphMode::kOn);
  EXPECT_FALSE(eager.graphed);
  EXPECT_TRUE(graphed.graphed) << "the step was not captured (a fallback to eager steps was logged)";
  ASSERT_EQ(graphed.losses.size(), eager.losses.size());
  for (size_t s = 0; s < eager.losses.size(); ++s) {
    EXPECT_NEAR(graphed.losses[s], eager.losses[s], 1e-5 * std::max(1.0f, std::fabs(eager.losses[s])))
        << config.name << " step " << s + 1;
    EXPECT_EQ(graphed.scales[s], eager.scales[s]) << config.name << " step " << s + 1;
  }
  ASSERT_EQ(graphed.weights.size(), eager.weights.size());
  for (size_t i = 0; i < eager.weights.size(); ++i) {
    EXPECT_LE(testing::RelNorm(graphed.weights[i], eager.weights[i]), 1e-5) << config.name << " parameter " << i;
  }
  // Not slower (generous margin for timing noise); the bench line records both.
  std::printf("bench: %s steps=%zu eager_ms_per_step=%.3f graphed_ms_per_step=%.3f\n", config.name.c_str(),
              eager.losses.size() - 5, 1e3 * eager.seconds_after_warmup / (eager.losses.size() - 5),
              1e3 * graphed.seconds_after_warmup / (graphed.losses.size() - 5));
  if (check_speed) {
    EXPECT_LE(graphed.seconds_after_warmup, 1.25 * eager.seconds_after_warmup) << config.name;
  }
}

TEST(TrainerGraphTest, GraphedMlpAdamWMatchesEager) {
  SKIP_WITHOUT_DEVICE();
  ExpectGraphedMatchesEager(MlpConfig());
}

TEST(TrainerGraphTest, GraphedCnnSgdMatchesEager) {
  SKIP_WITHOUT_DEVICE();
  ExpectGraphedMatchesEager(CnnConfig());
}

TEST(TrainerGraphTest, GraphedFp16RecapturesWhenTheLossScaleChanges) {
  SKIP_WITHOUT_DEVICE();
  ExpectGraphedMatchesEager(MlpFp16Config(), /*check_speed=*/false);
}

TEST(TrainerGraphTest, GraphedCnnBf16MatchesEager) {
  SKIP_WITHOUT_DEVICE();
  // Speed is the fp32 tests' check; this one checks the 16-bit step's capture.
  ExpectGraphedMatchesEager(CnnBf16Config(), /*check_speed=*/false);
}

TEST(TrainerGraphTest, AutoGraphsSmallModelsOnly) {
  SKIP_WITHOUT_DEVICE();
  TrainerConfig config = MlpConfig();
  config.steps = 8;
  EXPECT_TRUE(Train(config, CudaGraphMode::kAuto).graphed);
  config.model.dropout = 0.1f;  // a new key every step: eager
  EXPECT_FALSE(Train(config, CudaGraphMode::kAuto).graphed);
}

TEST(TrainerGraphTest, OnWithDropoutNamesTheField) {
  SKIP_WITHOUT_DEVICE();
  TrainerConfig config = MlpConfig();
  config.model.dropout = 0.1f;
  config.cuda_graphs = CudaGraphMode::kOn;
  auto trainer = Trainer::Create(config, TrainerOptions{});
  ASSERT_FALSE(trainer.ok());
  EXPECT_EQ(trainer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(trainer.status().message().find("cuda_graphs"), std::string::npos) << trainer.status();
}

// A parameter of zeros on b's device (no operand copy: the optimizer reads
// values and gradients only), its fields set by name.
Parameter ZeroParameter(Backend& b, std::string name, const Shape& shape, bool decay) {
  Parameter p;
  p.name = std::move(name);
  p.value = b.Zeros(shape);
  p.grad = b.Zeros(shape);
  p.decay = decay;
  return p;
}

// The optimizer state of CUDA parameters comes from the backend's caching
// allocator when the trainer's DeviceZerosFn is passed: its stats count it.
TEST(TrainerGraphTest, OptimizerStateIsInTheAllocatorStats) {
  SKIP_WITHOUT_DEVICE();
  auto backend = CudaBackend::Create({});
  ASSERT_TRUE(backend.ok()) << backend.status();
  Backend& b = **backend;
  Parameter w = ZeroParameter(b, "w", {300, 70}, /*decay=*/true);
  Parameter bias = ZeroParameter(b, "b", {70}, /*decay=*/false);
  optim::OptimizerConfig config;
  config.kind = optim::OptimizerKind::kAdamW;  // two slots per parameter
  const size_t before = (*backend)->allocator().stats().allocated_bytes;
  auto optimizer = optim::Optimizer::Create(config, {&w, &bias},
                                            [&b](const Shape& shape) { return b.Zeros(shape); });
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  const size_t expected =
      2 * (CachingAllocator::RoundSize(300 * 70 * sizeof(float)) + CachingAllocator::RoundSize(70 * sizeof(float)));
  EXPECT_EQ((*backend)->allocator().stats().allocated_bytes - before, expected);
  EXPECT_EQ((*optimizer)->StateBytes(), (300 * 70 + 70) * 2 * sizeof(float));
  optimizer->reset();
  EXPECT_EQ((*backend)->allocator().stats().allocated_bytes, before);
  ASSERT_TRUE(b.Synchronize().ok());
}

// Checkpoints on the device: rank 0 snapshots into page-locked host buffers
// and writes in the background. The write of step 5 is held until step 9 ran,
// so a snapshot that shared memory with the live state (or a copy not waited
// for) would hold step 9's values; a synchronous save of the same run is the
// reference. Two runs of the same config: within fp32 rounding (relative
// 1e-5), while four AdamW steps move weights and moments by far more.
void ExpectCheckpointsClose(const std::string& a, const std::string& b, int64_t step) {
  auto left = LoadCheckpoint(a + "/" + StepDirectoryName(step));
  auto right = LoadCheckpoint(b + "/" + StepDirectoryName(step));
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_EQ(left->contents.state, right->contents.state);
  for (auto [l, r] : {std::pair{&left->contents.model, &right->contents.model},
                      std::pair{&left->contents.optimizer, &right->contents.optimizer}}) {
    ASSERT_EQ(l->size(), r->size());
    for (size_t i = 0; i < l->size(); ++i) {
      ASSERT_EQ((*l)[i].first, (*r)[i].first);
      const std::vector<float> x = (*l)[i].second.ToVector(), y = (*r)[i].second.ToVector();
      ASSERT_EQ(x.size(), y.size()) << (*l)[i].first;
      for (size_t k = 0; k < x.size(); ++k) {
        ASSERT_NEAR(x[k], y[k], 1e-5 * std::max(1.0f, std::abs(y[k]))) << (*l)[i].first << "[" << k << "], step " << step;
      }
    }
  }
}

TEST(TrainerGraphTest, AsyncCheckpointFromPinnedSnapshotsMatchesASynchronousSave) {
  SKIP_WITHOUT_DEVICE();
  TrainerConfig config = MlpConfig();
  config.steps = 20;
  config.checkpoint_interval_steps = 5;
  config.checkpoint_keep = 0;
  config.cuda_graphs = CudaGraphMode::kOff;
  const std::string base = ::testing::TempDir() + "/pinned_snapshot";
  std::filesystem::remove_all(base);
  // The training thread reports steps, the writer thread waits for step 9.
  std::mutex mu;
  std::condition_variable stepped;
  int64_t last_step = 0;
  bool held = false;
  TrainerOptions async;
  async.checkpoint_dir = base + "/async";
  async.on_step = [&](const StepReport& r) {
    std::lock_guard<std::mutex> lock(mu);
    last_step = r.step;
    stepped.notify_all();
  };
  async.before_checkpoint_write = [&](int64_t step) {
    if (step != 5) return;
    std::unique_lock<std::mutex> lock(mu);  // at most 30 s: a test fails, never hangs
    held = stepped.wait_for(lock, std::chrono::seconds(30), [&] { return last_step >= 9; });
  };
  auto a = Trainer::Create(config, async);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE((*a)->Run().ok());
  EXPECT_TRUE(held) << "step 9 never ran while the step-5 checkpoint was being written";
  TrainerOptions sync;
  sync.checkpoint_dir = base + "/sync";
  sync.async_checkpoints = false;
  auto b = Trainer::Create(config, sync);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*b)->Run().ok());
  for (int64_t step : {5, 10, 15, 20}) ExpectCheckpointsClose(async.checkpoint_dir, sync.checkpoint_dir, step);
}

}  // namespace
}  // namespace ringmaster::engine
