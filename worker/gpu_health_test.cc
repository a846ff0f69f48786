#include "worker/gpu_health.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ringmaster::worker {
namespace {

// The fake NVML (worker/testing/fake_nvml.cc) in this test's runfiles.
std::string FakeNvmlPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/ringmaster/worker/testing/libfake_nvml.so";
}

template <typename Fn>
Fn Control(void* handle, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(handle, name));
  EXPECT_NE(fn, nullptr) << name;
  return fn;
}

class GpuHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Held open so that the fake's state outlives each GpuHealth's dlclose.
    fake_ = dlopen(FakeNvmlPath().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(fake_, nullptr) << dlerror();
    Control<void (*)()>(fake_, "FakeNvmlReset")();
    SetGpus({"GPU-aaaa", "GPU-bbbb", "GPU-cccc"});
  }
  void TearDown() override {
    if (fake_ != nullptr) dlclose(fake_);
  }

  void SetGpus(const std::vector<std::string>& uuids) {
    std::vector<const char*> c;
    for (const std::string& u : uuids) c.push_back(u.c_str());
    Control<void (*)(const char* const*, unsigned int)>(fake_, "FakeNvmlSetGpus")(c.data(), c.size());
  }
  // The worker registered the three GPUs as CUDA 0, 1, 2.
  std::unique_ptr<GpuHealth> Open() {
    absl::StatusOr<std::unique_ptr<GpuHealth>> health =
        GpuHealth::Open({{0, "GPU-aaaa"}, {1, "GPU-bbbb"}, {2, "GPU-cccc"}}, FakeNvmlPath());
    EXPECT_TRUE(health.ok()) << health.status();
    return health.ok() ? std::move(*health) : nullptr;
  }
  int Initialized() { return Control<int (*)()>(fake_, "FakeNvmlInitialized")(); }

  void* fake_ = nullptr;
};

TEST_F(GpuHealthTest, HealthyGpusPass) {
  std::unique_ptr<GpuHealth> health = Open();
  ASSERT_NE(health, nullptr);
  EXPECT_EQ(health->Check(), "");
  EXPECT_EQ(health->CheckCount(), "");
  EXPECT_EQ(Initialized(), 1);
  health.reset();  // shuts NVML down and frees the event set
  EXPECT_EQ(Initialized(), 0);
  EXPECT_EQ(Control<int (*)()>(fake_, "FakeNvmlEventSets")(), 0);
}

TEST_F(GpuHealthTest, AMissingGpuFailsTheCount) {
  std::unique_ptr<GpuHealth> health = Open();
  ASSERT_NE(health, nullptr);
  SetGpus({"GPU-aaaa", "GPU-cccc"});
  const std::string want = "GPU 1 (GPU-bbbb): not seen by NVML (expected 3 GPUs, NVML sees 2)";
  EXPECT_EQ(health->CheckCount(), want);
  EXPECT_EQ(health->Check(), want);
  SetGpus({"GPU-aaaa", "GPU-bbbb", "GPU-cccc", "GPU-dddd"});  // others than ours do not matter
  EXPECT_EQ(health->Check(), "");
}

TEST_F(GpuHealthTest, UncorrectedEccErrorsFailTheGpu) {
  std::unique_ptr<GpuHealth> health = Open();
  ASSERT_NE(health, nullptr);
  Control<void (*)(unsigned int, unsigned long long)>(fake_, "FakeNvmlSetEcc")(2, 2);  // NOLINT
  EXPECT_EQ(health->Check(), "GPU 2 (GPU-cccc): 2 uncorrected ECC errors since the driver loaded");
  EXPECT_EQ(health->CheckCount(), "");  // before a placement only the count is asked
}

TEST_F(GpuHealthTest, ALinkThatWasUpGoingDownFailsTheGpu) {
  std::unique_ptr<GpuHealth> health = Open();
  ASSERT_NE(health, nullptr);
  Control<void (*)(unsigned int, unsigned int)>(fake_, "FakeNvmlSetLinkDown")(0, 3);
  EXPECT_EQ(health->Check(), "GPU 0 (GPU-aaaa): NVLink 3 is down");
}

TEST_F(GpuHealthTest, ALinkDownFromTheStartIsNotReported) {
  Control<void (*)(unsigned int, unsigned int)>(fake_, "FakeNvmlSetLinkDown")(1, 2);
  std::unique_ptr<GpuHealth> health = Open();
  ASSERT_NE(health, nullptr);
  EXPECT_EQ(health->Check(), "");
}

TEST_F(GpuHealthTest, ACriticalXidFailsTheGpuUntilTheWorkerRestarts) {
  std::unique_ptr<GpuHealth> health = Open();
  ASSERT_NE(health, nullptr);
  auto queue = Control<void (*)(unsigned int, unsigned long long)>(fake_, "FakeNvmlQueueXid");  // NOLINT
  queue(2, 79);
  queue(0, 48);
  EXPECT_EQ(health->Check(), "GPU 2 (GPU-cccc): XID 79 (fallen off the bus)");
  EXPECT_EQ(health->Check(), "GPU 2 (GPU-cccc): XID 79 (fallen off the bus)");  // the GPU needs a reset
}

TEST_F(GpuHealthTest, AnApplicationsXidDoesNotFailTheNode) {
  std::unique_ptr<GpuHealth> health = Open();
  ASSERT_NE(health, nullptr);
  auto queue = Control<void (*)(unsigned int, unsigned long long)>(fake_, "FakeNvmlQueueXid");  // NOLINT
  queue(1, 13);
  queue(1, 31);
  EXPECT_EQ(health->Check(), "");
  queue(1, 94);
  EXPECT_EQ(health->Check(), "GPU 1 (GPU-bbbb): XID 94 (contained ECC error)");
}

TEST_F(GpuHealthTest, NvmlThatCannotStartIsAnErrorNamingWhy) {
  Control<void (*)(int)>(fake_, "FakeNvmlSetInitResult")(9);
  absl::StatusOr<std::unique_ptr<GpuHealth>> health = GpuHealth::Open({{0, "GPU-aaaa"}}, FakeNvmlPath());
  ASSERT_FALSE(health.ok());
  EXPECT_EQ(health.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(health.status().message()), "nvmlInit_v2 (" + FakeNvmlPath() + "): Driver Not Loaded");
}

TEST_F(GpuHealthTest, AMissingLibraryIsAnErrorNamingIt) {
  absl::StatusOr<std::unique_ptr<GpuHealth>> health =
      GpuHealth::Open({{0, "GPU-aaaa"}}, "/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(health.ok());
  EXPECT_EQ(health.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(health.status().message().rfind("cannot load /nonexistent/libnvidia-ml.so.1: ", 0), 0u)
      << health.status();
}

TEST(XidTest, TheApplicationsXidsAreTheDocumentedOnes) {
  for (unsigned long long xid : {13, 31, 43, 45, 68, 109}) EXPECT_TRUE(XidIsApplications(xid)) << xid;  // NOLINT
  for (unsigned long long xid : {48, 63, 64, 74, 79, 92, 94, 95, 119, 120}) {  // NOLINT
    EXPECT_FALSE(XidIsApplications(xid)) << xid;
    EXPECT_NE(XidMeaning(xid), "") << xid;
  }
}

}  // namespace
}  // namespace ringmaster::worker
