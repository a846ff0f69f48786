#include "common/subprocess.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ringmaster {
namespace {

// Reaps `pid`, waiting at most 10 s.
ProcessExit Wait(pid_t pid) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (std::optional<ProcessExit> exit = TryReap(pid)) return *exit;
    absl::SleepFor(absl::Milliseconds(5));
  }
  kill(pid, SIGKILL);
  return *TryReap(pid);
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SubprocessTest, RunsWithItsEnvironmentDirectoryAndOutput) {
  const std::string dir = ::testing::TempDir();
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", "echo \"$GREETING from $(pwd)\"; echo oops >&2; exit 3"};
  o.extra_env = {"GREETING=hello"};
  o.cwd = "/";
  o.output_path = dir + "/out.log";
  absl::StatusOr<pid_t> pid = Spawn(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  const ProcessExit exit = Wait(*pid);
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_EQ(exit.Describe(), "exited with status 3");
  EXPECT_EQ(Read(dir + "/out.log"), "hello from /\noops\n");
}

TEST(SubprocessTest, AReplacedEnvironmentIsAllTheChildSees) {
  const std::string dir = ::testing::TempDir();
  SpawnOptions o;
  o.path = "/usr/bin/env";
  o.env = std::vector<std::string>{"ONLY=this"};
  o.output_path = dir + "/env.log";
  absl::StatusOr<pid_t> pid = Spawn(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_TRUE(Wait(*pid).Succeeded());
  EXPECT_EQ(Read(dir + "/env.log"), "ONLY=this\n");
}

TEST(SubprocessTest, FailuresToStartAreReturnedNotExits) {
  SpawnOptions missing;
  missing.path = "/nonexistent/trainer";
  EXPECT_EQ(Spawn(missing).status(),
            absl::FailedPreconditionError("cannot run /nonexistent/trainer: No such file or directory"));
  SpawnOptions bad_dir;
  bad_dir.path = "/bin/true";
  bad_dir.cwd = "/nonexistent";
  EXPECT_EQ(Spawn(bad_dir).status(),
            absl::FailedPreconditionError("cannot enter the directory /nonexistent: No such file or directory"));
  EXPECT_EQ(Spawn(SpawnOptions{}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SubprocessTest, ANewGroupIsSignalledAsAWhole) {
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", "sleep 30 & wait"};
  o.group = SpawnOptions::Group::kNewGroup;
  absl::StatusOr<pid_t> pid = Spawn(o);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(getpgid(*pid), *pid);
  ASSERT_EQ(kill(-*pid, SIGKILL), 0);
  const ProcessExit exit = Wait(*pid);
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_EQ(exit.Describe(), "was killed by signal 9");
}

}  // namespace
}  // namespace ringmaster
