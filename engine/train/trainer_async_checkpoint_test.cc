// Checkpoints that do not stop training: rank 0 writes and commits from a host
// snapshot on a background thread. Steps go on while a slow write is in
// flight and the files equal a synchronous save's; the next checkpoint waits
// for the one in flight; a write or commit error fails Run with its message;
// a stop waits for the write in flight.
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>

#include "engine/checkpoint/checkpoint.h"
#include "engine/train/trainer.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

constexpr auto kPatience = std::chrono::seconds(30);  // a latch never waits longer: a test fails, never hangs

// A GPT whose vocabulary (70) is padded to 128 rows (the checkpoint holds the
// real rows: views of the live tensors), trained with AdamW.
TrainerConfig GptConfig() {
  TrainerConfig c;
  c.name = "async-gpt";
  c.model.kind = nn::ModelKind::kGpt;
  c.model.seed = 9;
  c.model.n_layer = 2;
  c.model.n_head = 2;
  c.model.n_embd = 16;
  c.model.block_size = 12;
  c.model.vocab_size = 70;
  c.data.kind = DatasetKind::kSynthetic;
  c.data.synthetic_samples = 96;
  c.data.global_batch = 6;
  c.data.seed = 5;
  c.optimizer.kind = optim::OptimizerKind::kAdamW;
  c.optimizer.lr = 2e-3f;
  c.optimizer.weight_decay = 0.01f;
  c.schedule.base_lr = 2e-3f;
  c.steps = 20;
  c.checkpoint_interval_steps = 5;
  c.checkpoint_keep = 0;  // keep all: every step is compared
  c.eval_interval_steps = 1000;
  c.threads = 2;
  return c;
}

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Every file of checkpoint `step` in `a` and `b` is byte for byte the same.
void ExpectSameCheckpoint(const std::string& a, const std::string& b, int64_t step) {
  for (const char* file : {kModelFileName, kOptimizerFileName, kStateFileName, kManifestFileName}) {
    const std::string left = a + "/" + StepDirectoryName(step) + "/" + file;
    const std::string right = b + "/" + StepDirectoryName(step) + "/" + file;
    ASSERT_TRUE(std::filesystem::exists(left)) << left;
    ASSERT_TRUE(std::filesystem::exists(right)) << right;
    EXPECT_TRUE(ReadFile(left) == ReadFile(right)) << left << " differs from " << right;
  }
}

// What happened, in order, on either thread: "step N" (training thread),
// "commit N" (writer thread).
class Timeline {
 public:
  void Add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(what);
    cv_.notify_all();
  }
  // Waits (at most kPatience) until `what` happened; false if it never did.
  bool WaitFor(const std::string& what) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kPatience, [&] { return Index(what) >= 0; });
  }
  // The position of `what`, or -1.
  int Position(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    return Index(what);
  }

 private:
  int Index(const std::string& what) const {
    for (size_t i = 0; i < events_.size(); ++i)
      if (events_[i] == what) return static_cast<int>(i);
    return -1;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

TrainerOptions Recording(const std::string& dir, Timeline* timeline, std::vector<CheckpointReport>* commits) {
  TrainerOptions options;
  options.checkpoint_dir = dir;
  options.on_step = [timeline](const StepReport& r) { timeline->Add("step " + std::to_string(r.step)); };
  options.on_checkpoint = [timeline, commits](const CheckpointReport& c) {
    commits->push_back(c);  // the writer's thread; read after Run returned
    timeline->Add("commit " + std::to_string(c.step));
    return absl::OkStatus();
  };
  return options;
}

TEST(TrainerAsyncCheckpointTest, StepsGoOnWhileASlowWriteIsInFlightAndTheFilesEqualASynchronousSave) {
  const TrainerConfig config = GptConfig();
  const std::string async_dir = FreshDir("async");
  Timeline timeline;
  std::vector<CheckpointReport> commits;
  TrainerOptions options = Recording(async_dir, &timeline, &commits);
  // The write of step 5 waits until the training thread finished step 9:
  // with a synchronous save that never happens, and the wait times out.
  bool released = false;
  options.before_checkpoint_write = [&](int64_t step) {
    if (step == 5) released = timeline.WaitFor("step 9");
  };
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Run().ok());
  EXPECT_TRUE(released) << "no step ran while the checkpoint of step 5 was being written";
  EXPECT_LT(timeline.Position("step 9"), timeline.Position("commit 5"));
  EXPECT_LT(timeline.Position("commit 5"), timeline.Position("commit 10"));  // one at a time, in order
  ASSERT_EQ(commits.size(), 4u);
  for (const CheckpointReport& c : commits) {
    EXPECT_EQ(c.path, async_dir + "/" + StepDirectoryName(c.step));
    EXPECT_GT(c.stall_seconds, 0);
    EXPECT_GT(c.write_seconds, 0);
  }
  EXPECT_GT((*trainer)->last_checkpoint_stall_seconds(), 0);

  // The same run saving synchronously (the live tensors, no copy) writes
  // the same bytes: the snapshot of step 5 was not changed by steps 6-9.
  const std::string sync_dir = FreshDir("sync");
  Timeline sync_timeline;
  std::vector<CheckpointReport> sync_commits;
  TrainerOptions sync_options = Recording(sync_dir, &sync_timeline, &sync_commits);
  sync_options.async_checkpoints = false;
  auto sync = Trainer::Create(config, sync_options);
  ASSERT_TRUE(sync.ok()) << sync.status();
  ASSERT_TRUE((*sync)->Run().ok());
  ASSERT_EQ(sync_commits.size(), 4u);
  EXPECT_GE(sync_commits[0].stall_seconds, sync_commits[0].write_seconds);  // it waited for its write
  for (int64_t step : {5, 10, 15, 20}) ExpectSameCheckpoint(async_dir, sync_dir, step);
}

TEST(TrainerAsyncCheckpointTest, TheNextCheckpointWaitsForTheOneInFlight) {
  TrainerConfig config = GptConfig();
  config.steps = 6;
  config.checkpoint_interval_steps = 2;
  Timeline timeline;
  std::vector<CheckpointReport> commits;
  TrainerOptions options = Recording(FreshDir("waits"), &timeline, &commits);
  // A slow write of step 2: it goes on until training reached step 4 (due
  // for the next checkpoint), then for a measured while more.
  constexpr double kSlowSeconds = 0.3;
  options.before_checkpoint_write = [&](int64_t step) {
    if (step != 2) return;
    timeline.WaitFor("step 4");
    std::this_thread::sleep_for(std::chrono::duration<double>(kSlowSeconds));
  };
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Run().ok());
  // Step 5 came only after the checkpoint of step 2 was committed...
  EXPECT_LT(timeline.Position("commit 2"), timeline.Position("step 5"));
  ASSERT_EQ(commits.size(), 3u);
  EXPECT_EQ(commits[1].step, 4);
  // ...and the checkpoint of step 4 counts that wait as its stall.
  EXPECT_GE(commits[1].stall_seconds, kSlowSeconds * 0.9);
  EXPECT_LT(commits[2].stall_seconds, kSlowSeconds);  // the final one did not wait for another
}

TEST(TrainerAsyncCheckpointTest, AFailedCommitFailsRunWithItsMessage) {
  TrainerConfig config = GptConfig();
  Timeline timeline;
  std::vector<CheckpointReport> commits;
  TrainerOptions options = Recording(FreshDir("refused"), &timeline, &commits);
  options.on_checkpoint = [](const CheckpointReport& c) {
    return absl::InvalidArgumentError("commit of checkpoint " + c.path + " refused");
  };
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  absl::Status run = (*trainer)->Run();
  EXPECT_EQ(run.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(run.message().find("step-000000005 refused"), absl::string_view::npos) << run;
  // At the first step after the commit failed, at the latest at the next
  // checkpoint (step 10): it is never dropped.
  EXPECT_LE((*trainer)->step(), 10);
  EXPECT_GT((*trainer)->step(), 5);
}

TEST(TrainerAsyncCheckpointTest, AFailedWriteFailsRunNamingThePath) {
  TrainerConfig config = GptConfig();
  const std::string dir = FreshDir("unwritable");
  Timeline timeline;
  std::vector<CheckpointReport> commits;
  TrainerOptions options = Recording(dir, &timeline, &commits);
  // A file where the checkpoint directory should be: the write fails.
  options.before_checkpoint_write = [&](int64_t) { std::ofstream(dir) << "not a directory"; };
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  absl::Status run = (*trainer)->Run();
  EXPECT_FALSE(run.ok());
  EXPECT_NE(run.message().find(dir), absl::string_view::npos) << run;
  EXPECT_TRUE(commits.empty());
  std::filesystem::remove(dir);
}

TEST(TrainerAsyncCheckpointTest, AStopWaitsForTheWriteInFlight) {
  TrainerConfig config = GptConfig();
  Timeline timeline;
  std::vector<CheckpointReport> commits;
  TrainerOptions options = Recording(FreshDir("stopped"), &timeline, &commits);
  int64_t step = 0;
  options.on_step = [&](const StepReport& r) { step = r.step; };
  options.should_stop = [&] { return step >= 6; };
  // Still being written when the stop comes.
  options.before_checkpoint_write = [&](int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
  auto trainer = Trainer::Create(config, options);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  absl::Status run = (*trainer)->Run();
  EXPECT_EQ(run.code(), absl::StatusCode::kCancelled) << run;
  ASSERT_EQ(commits.size(), 1u);  // committed before Run returned
  EXPECT_EQ(commits[0].step, 5);
}

}  // namespace
}  // namespace ringmaster::engine
