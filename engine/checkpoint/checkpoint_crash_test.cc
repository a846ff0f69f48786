// SIGKILL during checkpoint saves, 50 times: a child process writes
// checkpoints in a loop (keep 2, so retention removes old ones too) and is
// killed at a random moment of a write. After every kill, every step
// directory left in place verifies against its manifest (a killed save or a
// killed removal never leaves a damaged checkpoint under a final name), and
// the newest checkpoint loads with exactly the contents of its step, at least
// as new as the last write the child saw finish.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "engine/checkpoint/checkpoint.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

namespace fs = std::filesystem;

constexpr int kKills = 50;

// Contents that differ per step, about 1.5 MB so that a save takes a while.
CheckpointContents ContentsOf(int64_t step) {
  CheckpointContents c;
  Tensor w = Tensor::Empty({256, 1024}, DType::kF32);
  auto* bytes = static_cast<unsigned char*>(w.raw());
  for (size_t i = 0; i < w.bytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + step * 13);
  Tensor m = Tensor::Empty({128, 1024}, DType::kF32);
  std::memset(m.raw(), static_cast<int>(step & 0xff), m.bytes());
  c.model = {{"layers.0.weight", w}};
  c.optimizer = {{"layers.0.weight.exp_avg", m}};
  c.state = {{"step", std::to_string(step)}};
  return c;
}

// Child: writes steps first, first+1, ... reporting each finished one on `fd`.
[[noreturn]] void SaveForever(const std::string& dir, int64_t first, int fd) {
  for (int64_t step = first;; ++step) {
    if (!WriteCheckpoint(dir, step, ContentsOf(step), /*keep=*/2).ok()) _exit(3);
    if (write(fd, &step, sizeof(step)) != sizeof(step)) _exit(4);
  }
}

TEST(CheckpointCrashTest, SigkillDuringSavesNeverLeavesADamagedCheckpointChosen) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/crash";
  fs::remove_all(dir);
  std::mt19937 rng(20261121);
  std::uniform_int_distribution<int> delay_us(0, 40000);
  int64_t last_finished = 0;  // newest step the child reported written
  int damaged_temporaries = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      SaveForever(dir, last_finished + 1, fds[1]);
    }
    close(fds[1]);
    // Let it finish one save, then kill it somewhere in a later one.
    int64_t step = 0;
    ASSERT_EQ(read(fds[0], &step, sizeof(step)), static_cast<ssize_t>(sizeof(step))) << "the child wrote nothing";
    last_finished = step;
    usleep(delay_us(rng));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child exited by itself with status " << status;
    while (read(fds[0], &step, sizeof(step)) == static_cast<ssize_t>(sizeof(step))) last_finished = step;
    close(fds[0]);

    for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
      if (entry.path().filename().string().rfind(".tmp-", 0) == 0) ++damaged_temporaries;
    }
    absl::StatusOr<std::vector<CheckpointInfo>> listed = ListCheckpoints(dir);
    ASSERT_TRUE(listed.ok()) << listed.status();
    for (const CheckpointInfo& info : *listed) {
      absl::StatusOr<Manifest> verified = VerifyCheckpoint(info.path);
      EXPECT_TRUE(verified.ok()) << "kill " << kill << ": " << verified.status();
    }
    absl::StatusOr<LoadedCheckpoint> newest = LoadNewestCheckpoint(dir);
    ASSERT_TRUE(newest.ok()) << "kill " << kill << ": " << newest.status();
    EXPECT_TRUE(newest->skipped.empty()) << "kill " << kill << ": " << newest->skipped[0];
    EXPECT_GE(newest->step, last_finished) << "kill " << kill;
    EXPECT_LE(newest->step, last_finished + 1) << "kill " << kill;
    const CheckpointContents want = ContentsOf(newest->step);
    ASSERT_EQ(newest->contents.model.size(), 1u);
    EXPECT_EQ(std::memcmp(newest->contents.model[0].second.raw(), want.model[0].second.raw(),
                          want.model[0].second.bytes()),
              0)
        << "kill " << kill << ": step " << newest->step << " holds other weights";
    last_finished = newest->step;
  }
  // Not an assertion (timing decides): how often a kill landed inside a save.
  std::printf("%d kills; %d left a .tmp- directory behind (ignored by readers, removed by the next save)\n", kKills,
              damaged_temporaries);
}

}  // namespace
}  // namespace ringmaster::engine
