// The trainer's end-to-end guarantees on the CPU backend: stopping and
// resuming changes nothing (same loss at every step, bitwise-equal weights), a
// damaged newest checkpoint falls back to the previous one, and fp16 overflow
// skips the step and halves the loss scale — also with the gradients spread
// over ZeRO-1 shards and pipeline stages, through the same step loop and
// scaler sequence the CUDA trainer runs.
#include <array>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <thread>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/file_io.h"
#include "engine/dist/in_process_group.h"
#include "engine/plan/plan.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

// A small CNN (BatchNorm buffers, dropout) on synthetic images: 32 steps per epoch.
TrainerConfig CnnConfig() {
  TrainerConfig c;
  c.name = "resume-cnn";
  c.model.kind = nn::ModelKind::kCnn;
  c.model.seed = 7;
  c.model.conv_channels = {4, 8};
  c.model.cnn_hidden_sizes = {16};
  c.model.dropout = 0.25f;
  c.data.kind = DatasetKind::kSynthetic;
  c.data.synthetic_samples = 512;
  c.data.global_batch = 16;
  c.data.seed = 3;
  c.optimizer.kind = optim::OptimizerKind::kSgd;
  c.optimizer.lr = 0.05f;
  c.optimizer.momentum = 0.9f;
  c.optimizer.nesterov = true;
  c.optimizer.weight_decay = 1e-4f;
  c.schedule.base_lr = 0.05f;
  c.schedule.warmup_steps = 5;
  c.schedule.decay = optim::LrDecay::kCosine;
  c.schedule.decay_steps = 40;
  c.steps = 40;  // crosses an epoch boundary
  c.eval_interval_steps = 1000;
  c.threads = 2;
  return c;
}

// An MLP trained with AdamW in fp16 with dynamic loss scaling.
TrainerConfig MlpFp16Config() {
  TrainerConfig c;
  c.name = "resume-mlp";
  c.model.kind = nn::ModelKind::kMlp;
  c.model.seed = 11;
  c.model.hidden_sizes = {32, 16};
  c.data.kind = DatasetKind::kSynthetic;
  c.data.synthetic_samples = 640;
  c.data.global_batch = 32;
  c.data.seed = 5;
  c.optimizer.kind = optim::OptimizerKind::kAdamW;
  c.optimizer.lr = 1e-3f;
  c.optimizer.weight_decay = 0.01f;
  c.schedule.base_lr = 1e-3f;
  c.compute_dtype = DType::kF16;
  c.loss_scaler.enabled = true;
  c.loss_scaler.initial_scale = 1024.0f;
  c.loss_scaler.growth_interval = 7;  // grows (and later backs off) within the run
  c.grad_clip_norm = 1.0f;
  c.steps = 30;
  c.eval_interval_steps = 1000;
  c.threads = 2;
  return c;
}

struct RunResult {
  std::vector<float> losses;  // indexed by step - 1; NaN where this run did not train
  std::vector<float> scales;
  std::vector<std::vector<uint8_t>> weights;
};

std::vector<std::vector<uint8_t>> WeightBytes(Trainer& t) {
  std::vector<std::vector<uint8_t>> out;
  for (Parameter* p : t.model().Parameters()) {
    const auto* b = static_cast<const uint8_t*>(p->value.raw());
    out.emplace_back(b, b + p->value.bytes());
  }
  for (Buffer* buf : t.model().Buffers()) {
    const auto* b = static_cast<const uint8_t*>(buf->value.raw());
    out.emplace_back(b, b + buf->value.bytes());
  }
  return out;
}

// Runs a trainer on `dir` for at most `max_steps` steps of this run (< 0: to
// the end), recording the loss of every step it trains.
RunResult Train(const TrainerConfig& config, const std::string& dir, int64_t max_steps,
                std::optional<std::string> resume_from = std::nullopt) {
  RunResult result;
  result.losses.assign(config.steps, std::nanf(""));
  result.scales.assign(config.steps, std::nanf(""));
  TrainerOptions options;
  options.checkpoint_dir = dir;
  options.resume_from = std::move(resume_from);
  options.max_steps_this_run = max_steps;
  options.on_step = [&](const StepReport& r) {
    result.losses[r.step - 1] = r.loss;
    result.scales[r.step - 1] = r.loss_scale;
  };
  auto trainer = Trainer::Create(config, options);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return result;
  absl::Status s = (*trainer)->Run();
  EXPECT_TRUE(s.ok()) << s;
  result.weights = WeightBytes(**trainer);
  return result;
}

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

void ExpectResumeIsExact(TrainerConfig config, const std::string& name) {
  constexpr int64_t kN = 20;
  config.steps = 2 * kN;
  RunResult straight = Train(config, FreshDir(name + "-straight"), -1);

  config.checkpoint_interval_steps = kN;
  std::string dir = FreshDir(name + "-resumed");
  RunResult first = Train(config, dir, kN);  // stops after step N (checkpoint N written)
  RunResult second = Train(config, dir, -1);  // resumes at N, runs to 2N

  for (int64_t s = 0; s < kN; ++s) {
    EXPECT_EQ(first.losses[s], straight.losses[s]) << "step " << s + 1;
    EXPECT_TRUE(std::isnan(second.losses[s])) << "step " << s + 1 << " was trained again after resuming";
  }
  for (int64_t s = kN; s < 2 * kN; ++s) {
    EXPECT_EQ(second.losses[s], straight.losses[s]) << "step " << s + 1;
    EXPECT_EQ(second.scales[s], straight.scales[s]) << "step " << s + 1;
  }
  ASSERT_EQ(second.weights.size(), straight.weights.size());
  for (size_t i = 0; i < straight.weights.size(); ++i) {
    EXPECT_TRUE(second.weights[i] == straight.weights[i]) << "tensor " << i << " differs after resume";
  }
}

TEST(TrainerTest, ResumeGivesIdenticalLossesAndBitwiseWeightsCnn) {
  TrainerConfig config = CnnConfig();
  ExpectResumeIsExact(config, "cnn");
}

TEST(TrainerTest, ResumeGivesIdenticalLossesAndBitwiseWeightsMlpFp16) {
  TrainerConfig config = MlpFp16Config();
  ExpectResumeIsExact(config, "mlp");
}

TEST(TrainerTest, DamagedNewestCheckpointFallsBackToThePreviousOne) {
  TrainerConfig config = CnnConfig();
  config.steps = 30;
  RunResult straight = Train(config, FreshDir("damaged-straight"), -1);

  config.checkpoint_interval_steps = 10;
  std::string dir = FreshDir("damaged");
  Train(config, dir, 20);  // checkpoints at 10 and 20
  // Flip one byte in the middle of the newest checkpoint's weights.
  std::string weights = dir + "/step-000000020/model.safetensors";
  ASSERT_TRUE(std::filesystem::exists(weights));
  {
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    std::streamoff middle = f.tellg() / 2;
    f.seekg(middle);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(middle);
    f.write(&c, 1);
  }
  RunResult resumed = Train(config, dir, -1);
  // Resumed from step 10: steps 11..30 trained again, identical to the straight run.
  for (int64_t s = 0; s < 10; ++s) EXPECT_TRUE(std::isnan(resumed.losses[s])) << "step " << s + 1;
  for (int64_t s = 10; s < 30; ++s) EXPECT_EQ(resumed.losses[s], straight.losses[s]) << "step " << s + 1;
}

// Under a coordinator only the checkpoint it recorded as committed is
// resumed from: a newer one on disk (written, never committed) is ignored,
// and with no committed checkpoint training starts at step 0.
TEST(TrainerTest, ResumesOnlyFromTheCommittedCheckpoint) {
  TrainerConfig config = MlpFp16Config();
  config.steps = 30;
  config.checkpoint_interval_steps = 10;
  RunResult straight = Train(config, FreshDir("committed-straight"), -1);
  std::string dir = FreshDir("committed");
  Train(config, dir, 20, std::string());  // writes 10 and 20 (no local retention)
  ASSERT_TRUE(std::filesystem::exists(dir + "/step-000000020"));

  RunResult resumed = Train(config, dir, 5, dir + "/step-000000010");
  for (int64_t s = 0; s < 10; ++s) EXPECT_TRUE(std::isnan(resumed.losses[s])) << "step " << s + 1;
  for (int64_t s = 10; s < 15; ++s) EXPECT_EQ(resumed.losses[s], straight.losses[s]) << "step " << s + 1;

  RunResult fresh = Train(config, dir, 3, std::string());
  for (int64_t s = 0; s < 3; ++s) EXPECT_EQ(fresh.losses[s], straight.losses[s]) << "step " << s + 1;

  TrainerOptions options;
  options.checkpoint_dir = dir;
  options.resume_from = dir + "/step-000000007";  // recorded, but gone
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->Run().code(), absl::StatusCode::kDataLoss);
}

// Data that is missing or malformed ends the job at once (the trainer exits
// kExitUnrecoverable on INVALID_ARGUMENT): no restart can fix it.
TEST(TrainerTest, MissingOrMalformedDataIsRefusedNamingDataPath) {
  TrainerConfig config = CnnConfig();
  config.data.kind = DatasetKind::kFashionMnist;
  config.data.path = FreshDir("no-data") + "/fashion-mnist";
  auto missing = Trainer::Create(config, TrainerOptions());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument) << missing.status();
  EXPECT_EQ(std::string(missing.status().message()).rfind("data.path: ", 0), 0u) << missing.status();
  std::filesystem::create_directories(config.data.path);
  std::ofstream(config.data.path + "/train-images-idx3-ubyte.gz") << "not gzip";
  std::ofstream(config.data.path + "/train-labels-idx1-ubyte.gz") << "not gzip";
  auto malformed = Trainer::Create(config, TrainerOptions());
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument) << malformed.status();
}

// Under a coordinator the checkpoint is written beneath its root and resumed
// only as the coordinator recorded it at commit: a file altered afterwards,
// with its manifest rewritten to match, is DATA_LOSS and reported as damage.
TEST(TrainerTest, ResumeChecksTheCoordinatorsRecordBeneathTheRoot) {
  TrainerConfig config = MlpFp16Config();
  config.steps = 20;
  config.checkpoint_interval_steps = 10;
  const std::string root = FreshDir("recorded-root");
  const std::string dir = root + "/j-1/gen-1";
  {
    TrainerOptions options;
    options.checkpoint_dir = dir;
    options.checkpoint_roots = {root};
    options.resume_from = std::string();
    options.max_steps_this_run = 10;
    auto trainer = Trainer::Create(config, options);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
    ASSERT_TRUE((*trainer)->Run().ok());
  }
  const std::string path = dir + "/step-000000010";
  absl::StatusOr<Manifest> manifest = VerifyCheckpoint(path, root);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  auto resume = [&](const std::vector<ManifestEntry>& recorded, absl::Status* damage) {
    TrainerOptions options;
    options.checkpoint_dir = root + "/j-1/gen-2";
    options.checkpoint_roots = {root};
    options.resume_from = path;
    options.resume_recorded_files = recorded;
    options.max_steps_this_run = 1;
    options.on_resume_damaged = [damage](const absl::Status& s) { *damage = s; };
    auto trainer = Trainer::Create(config, options);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    return trainer.ok() ? (*trainer)->Run() : trainer.status();
  };
  absl::Status damage;
  EXPECT_TRUE(resume(manifest->files, &damage).ok());
  EXPECT_TRUE(damage.ok());

  // The state file altered after the commit, its manifest rewritten to match.
  const std::string state = path + "/state.json";
  std::string text;
  {
    std::ifstream in(state);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.insert(text.size() - 1, " ");
  std::ofstream(state, std::ios::trunc) << text;
  Manifest rewritten = *manifest;
  for (ManifestEntry& e : rewritten.files) {
    if (e.name == "state.json") {
      e.size = static_cast<int64_t>(text.size());
      e.sha256 = Sha256Hex(text);
    }
  }
  std::ofstream(path + "/MANIFEST.json", std::ios::trunc) << SerializeManifest(rewritten);
  ASSERT_TRUE(VerifyCheckpoint(path, root).ok()) << "the manifest alone is satisfied";
  absl::Status run = resume(manifest->files, &damage);
  EXPECT_EQ(run.code(), absl::StatusCode::kDataLoss) << run;
  EXPECT_EQ(damage.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(damage.message().find("but the coordinator recorded"), std::string::npos) << damage;
}

// Rank 0's checkpoint steps of a 2-rank run of `config` in a fresh `name`
// directory (the control collective every 5 steps), each rank's options
// completed by `customize`.
std::vector<int64_t> RankZeroCheckpointSteps(const TrainerConfig& config, const std::string& name,
                                             const std::function<void(int rank, TrainerOptions&)>& customize) {
  const std::string dir = FreshDir(name);
  auto world = dist::InProcessWorld::Create(2, {name, absl::Seconds(60)});
  std::vector<int64_t> written;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
      TrainerOptions options;
      options.world = group.get();
      options.coord = {r, 0};
      options.checkpoint_dir = dir;
      options.control_interval_steps = 5;
      options.on_checkpoint = [&](const CheckpointReport& checkpoint) {
        written.push_back(checkpoint.step);
        return absl::OkStatus();
      };
      customize(r, options);
      auto trainer = Trainer::Create(config, options);
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      absl::Status s = (*trainer)->Run();
      EXPECT_TRUE(s.ok()) << s;
    });
  }
  for (std::thread& t : threads) t.join();
  return written;
}

// A drain's "checkpoint now" reaches one rank; every rank agrees at the next
// control step and they write one checkpoint there, once.
TEST(TrainerTest, ARequestedCheckpointIsWrittenByEveryRankAtTheSameStep) {
  TrainerConfig config = MlpFp16Config();
  config.steps = 30;
  config.parallel.data = 2;
  config.threads = 1;
  std::array<int64_t, 2> steps = {0, 0};
  const std::vector<int64_t> written = RankZeroCheckpointSteps(config, "requested", [&](int r, TrainerOptions& o) {
    o.on_step = [&steps, r](const StepReport& report) { steps[r] = report.step; };
    // Only rank 1 hears of it, from step 7 on.
    o.checkpoint_requested = [&steps, r] { return r == 1 && steps[r] >= 7; };
  });
  EXPECT_EQ(written, (std::vector<int64_t>{10, 30}));  // at the next control step after 7, and at the end
  EXPECT_TRUE(std::filesystem::exists(::testing::TempDir() + "/requested/step-000000010"));
}

// Rank 0's checkpoint steps of a 2-rank run of `config` (15 steps) with a
// timed interval.
std::vector<int64_t> TimedCheckpointSteps(const TrainerConfig& config, const v1::AutoIntervalInputs& auto_interval,
                                          const std::string& name) {
  return RankZeroCheckpointSteps(config, name, [&](int, TrainerOptions& o) { o.auto_interval = auto_interval; });
}

// checkpoint.interval_seconds and auto: rank 0's clock decides, every rank
// checkpoints at the same control step (a rank that disagreed would hang in
// the gathers).
TEST(TrainerTest, TimedCheckpointsComeAtControlStepsAgreedByEveryRank) {
  TrainerConfig config = MlpFp16Config();
  config.steps = 15;
  config.parallel.data = 2;
  config.threads = 1;
  config.checkpoint_interval_seconds = 1e-9;  // due at every control step
  EXPECT_EQ(TimedCheckpointSteps(config, {}, "timed-often"), (std::vector<int64_t>{5, 10, 15}));
  config.checkpoint_interval_seconds = 1e9;  // never: the final one only
  EXPECT_EQ(TimedCheckpointSteps(config, {}, "timed-never"), (std::vector<int64_t>{15}));
  config.checkpoint_interval_seconds = 0;
  config.checkpoint_interval_auto = true;
  v1::AutoIntervalInputs bounds;  // the interval is held to (0, 1 ns]
  bounds.set_mtbf_seconds(3600);
  bounds.set_min_seconds(1e-9);
  bounds.set_max_seconds(1e-9);
  EXPECT_EQ(TimedCheckpointSteps(config, bounds, "auto-often"), (std::vector<int64_t>{5, 10, 15}));
  bounds.set_min_seconds(1e9);
  bounds.set_max_seconds(1e9);
  EXPECT_EQ(TimedCheckpointSteps(config, bounds, "auto-never"), (std::vector<int64_t>{15}));
}

// The first checkpoint allocates its snapshot buffers: its stall is not what
// a checkpoint costs, and the interval in force (the lower bound at first)
// stays until the second one measures it. Here the lower bound is 1 ns and
// the measured stall gives seconds (an MTBF of 10^6 s): checkpoints at steps
// 5 and 10, then none until the final one.
TEST(TrainerTest, TheFirstCheckpointsStallDoesNotChooseTheAutoInterval) {
  TrainerConfig config = MlpFp16Config();
  config.steps = 30;
  config.parallel.data = 2;
  config.threads = 1;
  config.checkpoint_interval_auto = true;
  v1::AutoIntervalInputs bounds;
  bounds.set_mtbf_seconds(1e6);
  bounds.set_min_seconds(1e-9);
  bounds.set_max_seconds(1e9);
  EXPECT_EQ(TimedCheckpointSteps(config, bounds, "auto-first"), (std::vector<int64_t>{5, 10, 30}));
}

// Each step report carries this rank's model FLOPs (as `ringmaster plan`
// counts them), its device's peak and the time it waited for its batch.
TEST(TrainerTest, StepReportsCarryModelFlopsPeakAndDataWait) {
  TrainerConfig config = CnnConfig();
  config.steps = 3;
  std::vector<StepReport> reports;
  TrainerOptions options;
  options.on_step = [&](const StepReport& r) { reports.push_back(r); };
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Run().ok());
  ASSERT_EQ(reports.size(), 3u);
  const double flops = plan::TrainingFlopsPerSample(config.model, 0, -1) * config.data.global_batch;
  for (const StepReport& r : reports) {
    EXPECT_DOUBLE_EQ(r.model_flops, flops);
    EXPECT_GT(r.peak_flops, 0);  // the CPU profile's share for 2 threads
    EXPECT_GE(r.data_wait_seconds, 0);
    EXPECT_LE(r.data_wait_seconds, r.seconds);
  }
}

TEST(TrainerTest, Fp16OverflowSkipsTheStepAndHalvesTheScale) {
  TrainerConfig config = MlpFp16Config();
  // 2^24 times the gradients overflows fp16 (max 65504): the first steps must
  // be skipped, each halving the scale, until the gradients fit.
  config.loss_scaler.initial_scale = 16777216.0f;
  config.loss_scaler.growth_interval = 1000;
  config.steps = 12;
  TrainerOptions options;
  std::vector<StepReport> reports;
  options.on_step = [&](const StepReport& r) { reports.push_back(r); };
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Run().ok());
  ASSERT_EQ(reports.size(), 12u);
  EXPECT_TRUE(reports[0].skipped);
  EXPECT_EQ(reports[0].loss_scale, 16777216.0f);
  int skipped = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    if (!reports[i].skipped) break;
    ++skipped;
    if (i + 1 < reports.size()) {
      EXPECT_EQ(reports[i + 1].loss_scale, reports[i].loss_scale * 0.5f) << "step " << i + 1;
    }
  }
  ASSERT_LT(skipped, 12) << "never recovered from overflow";
  EXPECT_EQ(reports.back().skipped_total, skipped);
  EXPECT_EQ((*trainer)->loss_scaler().scale(), 16777216.0f / (1 << skipped));
  // The weights moved only on the steps that were not skipped.
  EXPECT_EQ((*trainer)->step(), 12);
}

// fp16 overflow on a 2 x 2 grid (ZeRO-1 shards over the data replicas, two
// pipeline stages): every rank takes the same skip decisions and scales and
// sees the same gradient norm at every step, including a re-overflow after
// the scale grew. Against one process training the same spec they agree until
// the scale first grows; after that, the layouts' fp16 rounding differs and an
// overflow near the boundary may come at another step.
TEST(TrainerTest, Fp16OverflowDecisionsAgreeAcrossShardsAndStages) {
  TrainerConfig config = MlpFp16Config();
  config.loss_scaler.initial_scale = 16777216.0f;  // overflows first, as above
  config.loss_scaler.growth_interval = 4;          // grows and overflows again
  config.steps = 14;
  auto run = [](const TrainerConfig& c, dist::ProcessGroup* world, parallel::GridCoord coord) {
    std::vector<StepReport> reports;
    TrainerOptions options;
    options.world = world;
    options.coord = coord;
    options.on_step = [&](const StepReport& r) { reports.push_back(r); };
    auto trainer = Trainer::Create(c, options);
    EXPECT_TRUE(trainer.ok()) << trainer.status();
    if (trainer.ok()) {
      absl::Status s = (*trainer)->Run();
      EXPECT_TRUE(s.ok()) << s;
    }
    return reports;
  };
  const std::vector<StepReport> alone = run(config, nullptr, {});
  ASSERT_EQ(alone.size(), 14u);
  ASSERT_TRUE(alone[0].skipped);

  TrainerConfig grid = config;
  grid.parallel.data = 2;
  grid.parallel.pipeline = 2;
  grid.parallel.micro_batches = 2;
  grid.parallel.zero1 = true;
  grid.threads = 1;
  auto world = dist::InProcessWorld::Create(4, {"grid", absl::Seconds(60)});
  std::vector<std::vector<StepReport>> ranks(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
      ranks[r] = run(grid, group.get(), {/*data=*/r / 2, /*stage=*/r % 2});
    });
  }
  for (std::thread& t : threads) t.join();
  size_t first_clean = 0;
  while (first_clean < alone.size() && alone[first_clean].skipped) ++first_clean;
  const size_t before_growth = first_clean + config.loss_scaler.growth_interval;
  ASSERT_LT(before_growth, alone.size());
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(ranks[r].size(), alone.size()) << "rank " << r;
    for (size_t i = 0; i < alone.size(); ++i) {
      const StepReport& got = ranks[r][i];
      const StepReport& first = ranks[0][i];
      EXPECT_EQ(got.skipped, first.skipped) << "rank " << r << " step " << i + 1;
      EXPECT_EQ(got.loss_scale, first.loss_scale) << "rank " << r << " step " << i + 1;
      EXPECT_EQ(got.skipped_total, first.skipped_total) << "rank " << r << " step " << i + 1;
      EXPECT_EQ(got.grad_norm, first.grad_norm) << "rank " << r << " step " << i + 1;
      if (i >= before_growth) continue;
      const StepReport& want = alone[i];
      EXPECT_EQ(got.skipped, want.skipped) << "rank " << r << " step " << i + 1;
      EXPECT_EQ(got.loss_scale, want.loss_scale) << "rank " << r << " step " << i + 1;
      EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-3 * want.grad_norm + 1e-6) << "rank " << r << " step " << i + 1;
    }
  }
  // The grid overflowed again after growing: those decisions agreed too.
  bool overflowed_again = false;
  for (size_t i = first_clean; i < ranks[0].size(); ++i) overflowed_again = overflowed_again || ranks[0][i].skipped;
  EXPECT_TRUE(overflowed_again);
}

TEST(TrainerConfigTest, CudaGraphModeParsesAndNamesTheFieldOnError) {
  EXPECT_EQ(*ParseCudaGraphMode("", "cuda_graphs"), CudaGraphMode::kAuto);
  EXPECT_EQ(*ParseCudaGraphMode("auto", "cuda_graphs"), CudaGraphMode::kAuto);
  EXPECT_EQ(*ParseCudaGraphMode("on", "cuda_graphs"), CudaGraphMode::kOn);
  EXPECT_EQ(*ParseCudaGraphMode("off", "cuda_graphs"), CudaGraphMode::kOff);
  absl::StatusOr<CudaGraphMode> bad = ParseCudaGraphMode("sometimes", "resources.cuda_graphs");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("resources.cuda_graphs"), std::string::npos) << bad.status();
  EXPECT_EQ(TrainerConfig().cuda_graphs, CudaGraphMode::kAuto);
}

TEST(TrainerConfigTest, CudaGraphRule) {
  TrainerConfig config = MlpFp16Config();  // no dropout, one micro-batch
  EXPECT_TRUE(*UseCudaGraphs(config, 1, 1000));
  EXPECT_TRUE(*UseCudaGraphs(config, 1, kCudaGraphAutoMaxParameters));
  EXPECT_FALSE(*UseCudaGraphs(config, 1, kCudaGraphAutoMaxParameters + 1));  // auto: small models only
  EXPECT_FALSE(*UseCudaGraphs(config, 2, 1000));                             // collectives in the step
  config.cuda_graphs = CudaGraphMode::kOn;
  EXPECT_TRUE(*UseCudaGraphs(config, 1, kCudaGraphAutoMaxParameters + 1));
  absl::StatusOr<bool> two_ranks = UseCudaGraphs(config, 2, 1000);
  ASSERT_FALSE(two_ranks.ok());
  EXPECT_NE(two_ranks.status().message().find("resources.cuda_graphs"), std::string::npos) << two_ranks.status();
  config.parallel.micro_batches = 2;
  EXPECT_FALSE(UseCudaGraphs(config, 1, 1000).ok());
  config.parallel.micro_batches = 1;
  config.model.dropout = 0.1f;
  EXPECT_FALSE(UseCudaGraphs(config, 1, 1000).ok());
  config.cuda_graphs = CudaGraphMode::kAuto;
  EXPECT_FALSE(*UseCudaGraphs(config, 1, 1000));
  config.cuda_graphs = CudaGraphMode::kOff;
  config.model.dropout = 0.0f;
  EXPECT_FALSE(*UseCudaGraphs(config, 1, 1000));
}

// The CPU backend ignores cuda_graphs: "on" trains as before.
TEST(TrainerConfigTest, CudaGraphsOnIsIgnoredOnTheCpu) {
  TrainerConfig config = MlpFp16Config();
  config.steps = 3;
  config.cuda_graphs = CudaGraphMode::kOn;
  TrainerConfig eager = config;
  eager.cuda_graphs = CudaGraphMode::kOff;
  RunResult on = Train(config, FreshDir("cpu-graphs-on"), -1);
  RunResult off = Train(eager, FreshDir("cpu-graphs-off"), -1);
  EXPECT_EQ(on.losses, off.losses);
}

}  // namespace
}  // namespace ringmaster::engine
