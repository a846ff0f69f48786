// The trainer's device choice: resources.device and precision.compute TF32
// from the spec, and the backend a config gets in this build on this machine.
#include "engine/train/backend_factory.h"

#include <string>
#include <utility>

#include "common/spec.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

constexpr char kSpec[] = "examples/fashion_mnist_cnn.yaml";

TEST(TrainerDeviceConfigTest, SpecSelectsTheDeviceAndTf32) {
  auto cpu = LoadJobSpecFile(kSpec);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto config = TrainerConfigFromSpec(*cpu);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->device, Device::kCpu);
  EXPECT_FALSE(config->tf32);

  auto cuda = LoadJobSpecFile(kSpec, {"resources.device=cuda", "precision.compute=tf32"});
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  config = TrainerConfigFromSpec(*cuda);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->device, Device::kCuda);
  EXPECT_TRUE(config->tf32);
  EXPECT_EQ(config->compute_dtype, DType::kF32);
}

TEST(TrainerDeviceConfigTest, SpecSelectsCudaGraphs) {
  auto spec = LoadJobSpecFile(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto config = TrainerConfigFromSpec(*spec);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->cuda_graphs, CudaGraphMode::kAuto);
  for (auto [value, mode] : {std::pair{"on", CudaGraphMode::kOn}, std::pair{"off", CudaGraphMode::kOff}}) {
    spec = LoadJobSpecFile(kSpec, {std::string("resources.cuda_graphs=") + value});
    ASSERT_TRUE(spec.ok()) << spec.status();
    config = TrainerConfigFromSpec(*spec);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->cuda_graphs, mode) << value;
  }
  // An invalid value is rejected by the spec's validation, naming the field.
  spec = LoadJobSpecFile(kSpec, {"resources.cuda_graphs=maybe"});
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("resources.cuda_graphs"), std::string::npos) << spec.status();
}

TEST(BackendFactoryTest, CpuConfigGetsTheCpuBackend) {
  TrainerConfig config;
  config.threads = 1;
  config.compute_dtype = DType::kBF16;
  auto backend = CreateBackend(config);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->device(), Device::kCpu);
  EXPECT_EQ((*backend)->compute_dtype(), DType::kBF16);
  EXPECT_EQ(BackendStream(**backend), nullptr);
  EXPECT_EQ(BackendMemory(**backend).allocated_bytes, 0);
}

TEST(BackendFactoryTest, CudaConfigNeedsCudaAndADevice) {
  TrainerConfig config;
  config.device = Device::kCuda;
  auto backend = CreateBackend(config);
#if RINGMASTER_TEST_HAVE_CUDA
  if (backend.ok()) {
    // A GPU machine: the backend is on the device, with a stream.
    EXPECT_EQ((*backend)->device(), Device::kCuda);
    EXPECT_NE(BackendStream(**backend), nullptr);
  } else {
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition) << backend.status();
  }
#else
  EXPECT_EQ(backend.status(),
            absl::FailedPreconditionError("resources.device is cuda, but this trainer was built without CUDA (use "
                                          "resources.device: cpu or --device cpu)"));
#endif
}

}  // namespace
}  // namespace ringmaster::engine
