// The plan's memory against the trainer's: each example (MLP, CNN, GPT) runs
// a few steps on its 2 data-parallel CPU ranks (threads of this process, on
// synthetic data of the same shapes), and the process's peak of host tensor
// memory must be within 15% of the plan's peak per rank, times 2.
#include <thread>

#include "common/spec.h"
#include "engine/dist/in_process_group.h"
#include "engine/plan/plan.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::plan {
namespace {

struct Measured {
  int64_t peak_bytes = 0;
  int64_t before_bytes = 0;
};

// Runs `steps` steps of `config` on `ranks` data-parallel ranks.
Measured Train(const TrainerConfig& config, int ranks, int steps) {
  auto world = dist::InProcessWorld::Create(ranks, {"plan", absl::Seconds(120)});
  Measured measured;
  measured.before_bytes = HostTensorMemoryStats().live_bytes;
  ResetHostTensorPeak();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
      TrainerOptions options;
      options.world = group.get();
      options.coord = {r, 0};
      options.max_steps_this_run = steps;
      auto trainer = Trainer::Create(config, options);
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      absl::Status s = (*trainer)->Run();
      EXPECT_TRUE(s.ok()) << s;
    });
  }
  for (std::thread& t : threads) t.join();
  measured.peak_bytes = HostTensorMemoryStats().peak_bytes;
  return measured;
}

void ExpectPlanMatches(const std::string& path, const std::vector<std::string>& overrides) {
  SCOPED_TRACE(path);
  auto spec = LoadJobSpecFile(path, overrides);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto config = TrainerConfigFromSpec(*spec);
  ASSERT_TRUE(config.ok()) << config.status();
  config->threads = 1;
  auto device = FindDevice("cpu");
  ASSERT_TRUE(device.ok());
  auto plan = PlanJobSpec(*spec, *device, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int ranks = plan->ranks;
  ASSERT_EQ(ranks, 2);
  const Measured m = Train(*config, ranks, 3);
  const double predicted = static_cast<double>(plan->peak_bytes) * ranks;
  const double measured = static_cast<double>(m.peak_bytes - m.before_bytes);
  std::cout << path << ": predicted " << predicted / 1e6 << " MB for " << ranks << " ranks, measured "
            << measured / 1e6 << " MB (" << 100.0 * (predicted - measured) / measured << "%)\n"
            << PlanTable(*plan);
  EXPECT_NEAR(predicted, measured, 0.15 * measured);
}

const std::vector<std::string> kSynthetic = {"data.dataset=synthetic", "data.path=", "data.synthetic_samples=4096",
                                             "training.steps=1000", "checkpoint.interval_steps=0"};

TEST(PlanMemoryTest, MlpExample) { ExpectPlanMatches("examples/fashion_mnist_mlp.yaml", kSynthetic); }
TEST(PlanMemoryTest, CnnExample) { ExpectPlanMatches("examples/fashion_mnist_cnn.yaml", kSynthetic); }
TEST(PlanMemoryTest, GptExample) { ExpectPlanMatches("examples/gpt_text.yaml", kSynthetic); }

}  // namespace
}  // namespace ringmaster::engine::plan
