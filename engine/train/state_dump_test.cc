#include "engine/train/state_dump.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A thread stuck waiting (as a rank waits on a dead peer) until released.
class BlockedThread {
 public:
  BlockedThread() {
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      tid_ = static_cast<pid_t>(::syscall(SYS_gettid));
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return tid_ != 0; });
  }
  ~BlockedThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  pid_t tid() const { return tid_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  pid_t tid_ = 0;
  bool released_ = false;
  std::thread thread_;
};

TEST(StateDumpTest, Sigusr1WritesStepPhaseThreadsAndStacks) {
  const std::string path = ::testing::TempDir() + "/dump.log";
  std::FILE* log = std::fopen(path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(InstallStateDumpHandler(fileno(log)).ok());
  BlockedThread blocked;
  SetTrainingStep(42);
  ScopedTrainingPhase phase("gradient allreduce");

  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  // The dump thread writes asynchronously: wait for its end marker (bounded).
  std::string text;
  for (int i = 0; i < 500 && text.find("=== end of state dump ===") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    text = ReadAll(path);
  }
  std::fclose(log);
  ASSERT_NE(text.find("=== end of state dump ==="), std::string::npos) << text;
  EXPECT_NE(text.find("step 42, phase \"gradient allreduce\" for "), std::string::npos) << text;
  EXPECT_NE(text.find(absl::StrCat("thread ", ::getpid(), " \"")), std::string::npos) << text;
  EXPECT_NE(text.find(absl::StrCat("thread ", blocked.tid(), " \"")), std::string::npos) << text;
  // The blocked thread's stack: its header followed by at least one frame.
  const std::string header = absl::StrCat("--- thread ", blocked.tid(), " stack\n");
  const size_t at = text.find(header);
  ASSERT_NE(at, std::string::npos) << text;
  const std::string next = text.substr(at + header.size(), text.find('\n', at + header.size()) - at - header.size());
  EXPECT_NE(next.find("[0x"), std::string::npos) << "no frame after " << header << text;
}

TEST(StateDumpTest, ThePhaseScopeRestoresThePreviousPhase) {
  const std::string path = ::testing::TempDir() + "/scope.log";
  std::FILE* log = std::fopen(path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  SetTrainingStep(7);
  SetTrainingPhase("evaluation");
  { ScopedTrainingPhase inner("checkpoint save"); }
  WriteStateDump(fileno(log));
  std::fclose(log);
  EXPECT_NE(ReadAll(path).find("step 7, phase \"evaluation\""), std::string::npos) << ReadAll(path);
}

}  // namespace
}  // namespace ringmaster::engine
