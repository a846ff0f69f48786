// Real mixed precision, checked on the host: the trainer on a Storage16Backend
// (activations held in 16 bits, GEMM weights read from their 16-bit operand
// copies, as the CUDA backend does with bf16/fp16) must train exactly as on
// the CPU reference, which keeps f32 activations rounded to the same type.
// Bitwise-equal losses, evaluations and weights show that every layer
// allocates its activations in the activation dtype, passes operand copies to
// its GEMMs and convolutions, and that the trainer refreshes those copies
// after every change of the weights (each optimizer step, a resume); the
// Storage16Backend CHECKs every argument's dtype on the way.
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include "engine/dist/in_process_group.h"
#include "engine/core/storage16_backend.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

TrainerConfig Base(const std::string& name, DType dtype) {
  TrainerConfig c;
  c.name = name;
  c.data.kind = DatasetKind::kSynthetic;
  c.data.seed = 5;
  c.compute_dtype = dtype;
  c.eval_interval_steps = 4;
  c.threads = 2;
  c.optimizer.kind = optim::OptimizerKind::kAdamW;
  c.optimizer.lr = 2e-3f;
  c.optimizer.weight_decay = 0.01f;
  c.schedule.base_lr = 2e-3f;
  if (dtype == DType::kF16) {
    c.loss_scaler.enabled = true;
    c.loss_scaler.initial_scale = 1024.0f;
    c.loss_scaler.growth_interval = 3;
  }
  c.steps = 8;
  return c;
}

TrainerConfig Mlp(DType dtype) {
  TrainerConfig c = Base("storage16-mlp", dtype);
  c.model.kind = nn::ModelKind::kMlp;
  c.model.seed = 3;
  c.model.hidden_sizes = {24, 16};
  c.model.dropout = 0.2f;
  c.data.synthetic_samples = 128;
  c.data.global_batch = 16;
  return c;
}

TrainerConfig Cnn(DType dtype) {
  TrainerConfig c = Base("storage16-cnn", dtype);
  c.model.kind = nn::ModelKind::kCnn;
  c.model.seed = 7;
  c.model.conv_channels = {4, 6};
  c.model.cnn_hidden_sizes = {12};
  c.model.dropout = 0.25f;
  c.data.synthetic_samples = 64;
  c.data.global_batch = 8;
  c.optimizer.kind = optim::OptimizerKind::kSgd;
  c.optimizer.momentum = 0.9f;
  c.optimizer.lr = 0.05f;
  c.schedule.base_lr = 0.05f;
  return c;
}

// A vocabulary of 70 is padded to 128 rows: the fused classifier must keep
// the padding out of the loss, and checkpoints must hold 70 rows.
TrainerConfig Gpt(DType dtype) {
  TrainerConfig c = Base("storage16-gpt", dtype);
  c.model.kind = nn::ModelKind::kGpt;
  c.model.seed = 9;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.n_embd = 16;
  c.model.block_size = 12;
  c.model.vocab_size = 70;
  c.data.synthetic_samples = 96;
  c.data.global_batch = 6;
  c.parallel.micro_batches = 2;
  return c;
}

struct RunResult {
  std::vector<float> losses;  // one per step trained by this run
  std::vector<double> evals;
  std::vector<std::vector<float>> weights;
};

// Trains `config` on the CPU reference or on a Storage16Backend, for at most
// `max_steps` steps of this run (< 0: to the end), checkpointing into `dir`
// (none when empty); one rank of `world` at `coord` when world is set.
RunResult Train(const TrainerConfig& config, bool storage16, const std::string& dir, int64_t max_steps = -1,
                dist::ProcessGroup* world = nullptr, parallel::GridCoord coord = {}) {
  RunResult run;
  TrainerOptions options;
  options.world = world;
  options.coord = coord;
  options.checkpoint_dir = dir;
  options.max_steps_this_run = max_steps;
  options.on_step = [&](const StepReport& r) { run.losses.push_back(r.loss); };
  options.on_eval = [&](const EvalReport& r) { run.evals.push_back(r.loss); };
  if (storage16) {
    options.make_backend = [](const TrainerConfig& c) -> absl::StatusOr<std::unique_ptr<Backend>> {
      return std::unique_ptr<Backend>(std::make_unique<Storage16Backend>(c.compute_dtype, c.threads));
    };
  }
  auto trainer = Trainer::Create(config, options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return run;
  const absl::Status status = (*trainer)->Run();
  EXPECT_TRUE(status.ok()) << status;
  for (Parameter* p : (*trainer)->model().Parameters()) run.weights.push_back(p->value.ToVector());
  return run;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

void ExpectSameRun(const RunResult& a, const RunResult& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i + 1;
  ASSERT_EQ(a.evals.size(), b.evals.size());
  for (size_t i = 0; i < a.evals.size(); ++i) EXPECT_EQ(a.evals[i], b.evals[i]) << "evaluation " << i;
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) EXPECT_TRUE(a.weights[i] == b.weights[i]) << "parameter " << i;
}

void ExpectBitwiseLikeTheCpu(const TrainerConfig& config) {
  const RunResult cpu = Train(config, false, FreshDir(config.name + "-cpu"));
  const RunResult stored = Train(config, true, FreshDir(config.name + "-16"));
  ASSERT_EQ(cpu.losses.size(), static_cast<size_t>(config.steps));
  for (float loss : cpu.losses) EXPECT_TRUE(std::isfinite(loss));
  ExpectSameRun(cpu, stored);
}

TEST(TrainerStorage16Test, MlpBf16) { ExpectBitwiseLikeTheCpu(Mlp(DType::kBF16)); }
TEST(TrainerStorage16Test, MlpFp16WithLossScaling) { ExpectBitwiseLikeTheCpu(Mlp(DType::kF16)); }
TEST(TrainerStorage16Test, CnnBf16) { ExpectBitwiseLikeTheCpu(Cnn(DType::kBF16)); }
TEST(TrainerStorage16Test, GptBf16) { ExpectBitwiseLikeTheCpu(Gpt(DType::kBF16)); }
TEST(TrainerStorage16Test, GptFp16WithLossScaling) { ExpectBitwiseLikeTheCpu(Gpt(DType::kF16)); }

// Resuming rebuilds the operand copies from the checkpoint's weights (and the
// padded vocabulary from its 70 rows): the resumed 16-bit run continues the
// uninterrupted CPU run exactly.
TEST(TrainerStorage16Test, GptResumeRefreshesTheOperandCopies) {
  TrainerConfig config = Gpt(DType::kBF16);
  config.checkpoint_interval_steps = 4;
  const RunResult straight = Train(config, false, FreshDir("storage16-resume-cpu"));
  const std::string dir = FreshDir("storage16-resume");
  const RunResult first = Train(config, true, dir, 4);
  const RunResult second = Train(config, true, dir);
  ASSERT_EQ(first.losses.size(), 4u);
  ASSERT_EQ(second.losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(first.losses[i], straight.losses[i]) << "step " << i + 1;
    EXPECT_EQ(second.losses[i], straight.losses[4 + i]) << "step " << i + 5;
  }
  ASSERT_EQ(second.weights.size(), straight.weights.size());
  for (size_t i = 0; i < straight.weights.size(); ++i) {
    EXPECT_TRUE(second.weights[i] == straight.weights[i]) << "parameter " << i;
  }
}

// A 2 x 2 grid (ZeRO-1 over the data replicas, two pipeline stages with the
// tied vocabulary table on both): 16-bit activations cross between the stages,
// the last stage runs the fused classifier, and every rank trains bitwise as
// the same grid does on the CPU reference.
TEST(TrainerStorage16Test, GptGridWithPipelineAndZeroTrainsLikeTheCpu) {
  TrainerConfig config = Gpt(DType::kBF16);
  config.parallel.data = 2;
  config.parallel.pipeline = 2;
  config.parallel.micro_batches = 2;
  config.parallel.zero1 = true;
  config.data.global_batch = 8;
  config.threads = 1;
  auto grid = [&](bool storage16) {
    auto world = dist::InProcessWorld::Create(4, {storage16 ? "grid16" : "grid32", absl::Seconds(60)});
    std::vector<RunResult> ranks(4);
    std::vector<std::thread> threads;
    for (int r = 0; r < 4; ++r) {
      threads.emplace_back([&, r] {
        std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
        ranks[r] = Train(config, storage16, "", -1, group.get(), {/*data=*/r / 2, /*stage=*/r % 2});
      });
    }
    for (std::thread& t : threads) t.join();
    return ranks;
  };
  const std::vector<RunResult> cpu = grid(false), stored = grid(true);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    ASSERT_EQ(cpu[r].losses.size(), static_cast<size_t>(config.steps));
    ExpectSameRun(cpu[r], stored[r]);
  }
}

}  // namespace
}  // namespace ringmaster::engine
