#include "worker/job_dir_janitor.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

namespace fs = std::filesystem;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

void SetMtime(const fs::path& path, absl::Time t) {
  struct timespec times[2] = {absl::ToTimespec(t), absl::ToTimespec(t)};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

class JobDirJanitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // A job directory with one generation and a rank log, all last changed at `t`.
  void MakeJob(const std::string& job, absl::Time t) {
    const fs::path gen = dir_ / job / "gen-1";
    fs::create_directories(gen / "rank-0");
    std::ofstream(gen / "rank-0.log") << "log\n";
    for (const fs::path& p : {gen / "rank-0", gen / "rank-0.log", gen, dir_ / job}) SetMtime(p, t);
  }
  std::vector<std::string> Left() const {
    std::vector<std::string> jobs;
    for (const auto& e : fs::directory_iterator(dir_)) jobs.push_back(e.path().filename().string());
    std::sort(jobs.begin(), jobs.end());
    return jobs;
  }
  fs::path dir_;
};

TEST_F(JobDirJanitorTest, RemovesOldFinishedJobsAndKeepsTheNewestCount) {
  MakeJob("j-1", kNow - absl::Hours(10 * 24));  // too old
  MakeJob("j-2", kNow - absl::Hours(30 * 24));  // too old, but running here
  MakeJob("j-3", kNow - absl::Hours(3));        // 3rd newest finished: beyond the count
  MakeJob("j-4", kNow - absl::Hours(2));
  MakeJob("j-5", kNow - absl::Hours(1));
  JobRetention retention{absl::Hours(7 * 24), 2};
  PruneResult result = PruneJobDirs(dir_.string(), {"j-2"}, kNow, retention);
  EXPECT_TRUE(result.errors.empty());
  std::sort(result.removed.begin(), result.removed.end());
  EXPECT_EQ(result.removed, (std::vector<std::string>{"j-1", "j-3"}));
  EXPECT_EQ(Left(), (std::vector<std::string>{"j-2", "j-4", "j-5"}));
}

TEST_F(JobDirJanitorTest, ARecentLogKeepsAnOldDirectory) {
  MakeJob("j-1", kNow - absl::Hours(10 * 24));
  SetMtime(dir_ / "j-1" / "gen-1" / "rank-0.log", kNow - absl::Hours(1));  // a rank wrote lately
  EXPECT_TRUE(PruneJobDirs(dir_.string(), {}, kNow, {absl::Hours(7 * 24), -1}).removed.empty());
  EXPECT_EQ(Left(), (std::vector<std::string>{"j-1"}));
}

TEST_F(JobDirJanitorTest, NoLimitsRemoveNothing) {
  MakeJob("j-1", kNow - absl::Hours(1000 * 24));
  EXPECT_TRUE(PruneJobDirs(dir_.string(), {}, kNow, {absl::ZeroDuration(), -1}).removed.empty());
  EXPECT_TRUE(PruneJobDirs((dir_ / "missing").string(), {}, kNow, {}).removed.empty());
}

TEST_F(JobDirJanitorTest, TheJanitorPrunesOnStartAndStops) {
  MakeJob("j-1", absl::Now() - absl::Hours(10 * 24));
  MakeJob("j-2", absl::Now() - absl::Hours(10 * 24));
  JobDirJanitor janitor(dir_.string(), {absl::Hours(7 * 24), -1}, [] { return std::set<std::string>{"j-2"}; },
                        absl::Milliseconds(10));
  janitor.Start();
  for (int i = 0; i < 500 && fs::exists(dir_ / "j-1"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  janitor.Stop();
  EXPECT_EQ(Left(), (std::vector<std::string>{"j-2"}));
}

}  // namespace
}  // namespace ringmaster::worker
