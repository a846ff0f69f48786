#include "engine/train/launcher.h"

#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

LaunchOptions Shell(int nproc, const std::string& script) {
  LaunchOptions options;
  options.nproc = nproc;
  options.argv = {"/bin/sh", "-c", script};
  options.grace = absl::Milliseconds(500);
  return options;
}

TEST(LauncherTest, EveryRankRunsWithItsEnvironment) {
  std::string dir = ::testing::TempDir();
  LaunchOptions options = Shell(3, "echo $RINGMASTER_RANK/$RINGMASTER_LOCAL_RANK/$RINGMASTER_WORLD_SIZE/$EXTRA > "
                                   "\"$OUT_DIR/rank-$RINGMASTER_RANK\"");
  options.env = {{"EXTRA", "x"}, {"OUT_DIR", dir}};
  ASSERT_TRUE(RunLocalRanks(options).ok());
  for (int r = 0; r < 3; ++r) {
    std::ifstream in(dir + "/rank-" + std::to_string(r));
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, std::to_string(r) + "/" + std::to_string(r) + "/3/x");
  }
}

// Rank 1 fails at once; the others would sleep for a minute. They must be
// stopped within the grace period and reaped, and the error names rank 1.
TEST(LauncherTest, AFailingRankStopsTheOthers) {
  std::string pids = ::testing::TempDir() + "/pids";
  std::remove(pids.c_str());
  LaunchOptions options =
      Shell(4, "echo $$ >> \"$PIDS\"; if [ \"$RINGMASTER_RANK\" = 1 ]; then sleep 0.2; exit 3; fi; exec sleep 60");
  options.env = {{"PIDS", pids}};
  auto start = std::chrono::steady_clock::now();
  absl::Status s = RunLocalRanks(options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "rank 1 exited with status 3");
  EXPECT_LT(seconds, 5.0) << "the sleeping ranks were not stopped";
  std::ifstream in(pids);
  int pid = 0, count = 0;
  while (in >> pid) {
    ++count;
    EXPECT_NE(kill(pid, 0), 0) << "rank process " << pid << " outlived the launcher";
  }
  EXPECT_EQ(count, 4);
}

// A rank that ignores SIGTERM is killed after the grace period.
TEST(LauncherTest, ARankIgnoringSigtermIsKilled) {
  LaunchOptions options =
      Shell(2, "if [ \"$RINGMASTER_RANK\" = 0 ]; then exit 1; fi; trap '' TERM; while :; do sleep 0.05; done");
  auto start = std::chrono::steady_clock::now();
  absl::Status s = RunLocalRanks(options);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.message(), "rank 0 exited with status 1");
  EXPECT_LT(seconds, 5.0);
}

TEST(LauncherTest, BadArguments) {
  LaunchOptions options;
  options.nproc = 0;
  options.argv = {"/bin/true"};
  EXPECT_EQ(RunLocalRanks(options).message(), "nproc must be >= 1, got 0");
  options.nproc = 1;
  options.argv.clear();
  EXPECT_EQ(RunLocalRanks(options).message(), "no command to launch");
}

}  // namespace
}  // namespace ringmaster::engine
