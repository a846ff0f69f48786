#include "worker/health_checks.h"

#include <map>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "worker/testing/test_util.h"

namespace ringmaster::worker {
namespace {

using testing::TempDir;
using testing::WriteScript;

constexpr int64_t kMiB = int64_t{1} << 20;

// GPU checks that say what the test sets.
class FakeGpuCheck : public GpuCheck {
 public:
  std::string Check() override { return check; }
  std::string CheckCount() override { return count; }
  std::string check;
  std::string count;
};

class HealthChecksTest : public ::testing::Test {
 protected:
  HealthCheckOptions Options() {
    HealthCheckOptions o;
    o.disk_paths = {dir_.Join("state")};
    o.min_free_bytes = 256 * kMiB;
    o.output_dir = dir_.Join("health");
    o.script_timeout = absl::Seconds(5);
    return o;
  }
  // Free space as the test sets it, per path; unknown paths have plenty.
  HealthChecks::FreeSpace Fake() {
    return [this](const std::string& path) -> absl::StatusOr<int64_t> {
      auto it = free_.find(path);
      if (it == free_.end()) return int64_t{100} << 30;
      if (it->second < 0) return absl::FailedPreconditionError(path + ": Permission denied");
      return it->second;
    };
  }

  TempDir dir_;
  FakeClock clock_;
  std::map<std::string, int64_t> free_;
};

TEST_F(HealthChecksTest, AllPassOnAHealthyNode) {
  HealthCheckOptions o = Options();
  o.scripts = {WriteScript(dir_.Join("ok.sh"), "echo all good; exit 0")};
  HealthChecks checks(o, &clock_, Fake());
  EXPECT_EQ(checks.Run(), "");
  EXPECT_EQ(checks.Failure(), "");
  EXPECT_EQ(checks.CheckBeforePlacement(), "");
}

TEST_F(HealthChecksTest, LowFreeSpaceFailsNamingThePathAndTheFlag) {
  free_[dir_.Join("state")] = 100 * kMiB;
  HealthChecks checks(Options(), &clock_, Fake());
  EXPECT_EQ(checks.Run(), "free space: " + dir_.Join("state") +
                              " has 100 MiB available, below --health-min-free-mb 256");
  free_[dir_.Join("state")] = 300 * kMiB;
  EXPECT_EQ(checks.Run(), "");
  free_[dir_.Join("state")] = -1;
  EXPECT_EQ(checks.Run(), "free space: cannot examine " + dir_.Join("state") + ": Permission denied");
}

TEST_F(HealthChecksTest, BeforeAPlacementTheOrdersCheckpointRootIsCheckedToo) {
  const std::string root = dir_.Join("ckpt");
  testing::WriteFile(root + "/x", "");
  free_[root] = 10 * kMiB;
  HealthChecks checks(Options(), &clock_, Fake());
  EXPECT_EQ(checks.CheckBeforePlacement({root}), "free space: " + root +
                                                     " has 10 MiB available, below --health-min-free-mb 256");
  EXPECT_EQ(checks.CheckBeforePlacement({dir_.Join("missing")}), "");  // not on this node: skipped
}

TEST_F(HealthChecksTest, MissingDataRootsFailOnlyWhenRequired) {
  HealthCheckOptions o = Options();
  o.data_roots = {dir_.path(), dir_.Join("datasets")};
  EXPECT_EQ(HealthChecks(o, &clock_, Fake()).Run(), "");
  o.require_data_roots = true;
  EXPECT_EQ(HealthChecks(o, &clock_, Fake()).Run(),
            "data roots: " + dir_.Join("datasets") + " is not a directory here (--data-roots)");
}

TEST_F(HealthChecksTest, AFailingScriptGivesItsFirstOutputLine) {
  HealthCheckOptions o = Options();
  o.scripts = {WriteScript(dir_.Join("ok.sh"), "exit 0"),
               WriteScript(dir_.Join("ib.sh"), "echo; echo '  mlx5_0: link down  ' >&2; echo more; exit 3")};
  HealthChecks checks(o, &clock_, Fake());
  EXPECT_EQ(checks.Run(), "health check " + dir_.Join("ib.sh") + ": mlx5_0: link down");
  // Before a placement the scripts are not run again: their latest result counts.
  EXPECT_EQ(checks.CheckBeforePlacement(), "health check " + dir_.Join("ib.sh") + ": mlx5_0: link down");
}

TEST_F(HealthChecksTest, AScriptThatSaysNothingIsDescribedByHowItEnded) {
  HealthCheckOptions o = Options();
  o.scripts = {WriteScript(dir_.Join("quiet.sh"), "exit 2"), dir_.Join("absent.sh")};
  EXPECT_EQ(HealthChecks(o, &clock_, Fake()).Run(), "health check " + dir_.Join("quiet.sh") + ": exited with status 2");
  o.scripts = {dir_.Join("absent.sh")};
  const std::string failure = HealthChecks(o, &clock_, Fake()).Run();
  EXPECT_NE(failure.find("health check " + dir_.Join("absent.sh") + ": "), std::string::npos) << failure;
}

TEST_F(HealthChecksTest, AScriptThatHangsIsKilledAtTheTimeout) {
  HealthCheckOptions o = Options();
  o.script_timeout = absl::Milliseconds(300);
  o.scripts = {WriteScript(dir_.Join("hang.sh"), "echo started; sleep 30")};
  const absl::Time start = absl::Now();
  EXPECT_EQ(HealthChecks(o, &clock_, Fake()).Run(),
            "health check " + dir_.Join("hang.sh") + ": no answer within 300ms (--health-check-timeout)");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(HealthChecksTest, AFailingGpuCheckIsTheReasonAfterTheFileSystems) {
  auto gpu = std::make_shared<FakeGpuCheck>();
  HealthCheckOptions o = Options();
  o.gpu = gpu;
  o.scripts = {WriteScript(dir_.Join("ib.sh"), "echo mlx5_0: link down; exit 1")};
  HealthChecks checks(o, &clock_, Fake());
  gpu->check = "GPU 2 (GPU-cccc): XID 79 (fallen off the bus)";
  EXPECT_EQ(checks.Run(), gpu->check);
  // Before a placement: the count now, else the latest full GPU check.
  EXPECT_EQ(checks.CheckBeforePlacement(), gpu->check);
  gpu->count = "GPU 1 (GPU-bbbb): not seen by NVML (expected 3 GPUs, NVML sees 2)";
  EXPECT_EQ(checks.CheckBeforePlacement(), gpu->count);
  EXPECT_EQ(checks.Failure(), gpu->count);
  gpu->check = gpu->count = "";
  EXPECT_EQ(checks.Run(), "health check " + dir_.Join("ib.sh") + ": mlx5_0: link down");
  free_[dir_.Join("state")] = 10 * kMiB;
  gpu->check = "GPU 0 (GPU-aaaa): NVLink 3 is down";
  EXPECT_EQ(checks.Run(),
            "free space: " + dir_.Join("state") + " has 10 MiB available, below --health-min-free-mb 256");
}

TEST_F(HealthChecksTest, StartRunsThemEveryInterval) {
  HealthCheckOptions o = Options();
  o.interval = absl::Seconds(30);
  free_[dir_.Join("state")] = 10 * kMiB;
  HealthChecks checks(o, &clock_, Fake());
  EXPECT_FALSE(checks.Run().empty());
  free_[dir_.Join("state")] = 300 * kMiB;
  checks.Start();
  // Not before the interval (the thread waits on the fake clock)...
  ASSERT_TRUE(clock_.AwaitSleepers(1));
  EXPECT_FALSE(checks.Failure().empty());
  clock_.Advance(absl::Seconds(30));
  EXPECT_TRUE(testing::WaitUntil([&] { return checks.Failure().empty(); }));
  checks.Stop();
}

}  // namespace
}  // namespace ringmaster::worker
