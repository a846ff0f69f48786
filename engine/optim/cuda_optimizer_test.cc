// GPU tests of training steps on the device: the fused multi-tensor updates
// against the CPU optimizer on the same random parameters, and the loss
// scaler's skip/halve/grow decided on the device. Skipped without a device.
#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "engine/optim/device_loss_scaler.h"
#include "engine/optim/grad_norm.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/test_util.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::optim {
namespace {

using testing::MaxRelativeError;
using testing::RandomGrads;
using testing::StandardSpecs;
using testing::TestParams;

bool HaveDevice() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return false;
  }
  return true;
}

#define SKIP_WITHOUT_DEVICE() \
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: device optimizer steps not exercised"

Tensor DeviceTensor(const Shape& shape) {
  void* data = nullptr;
  EXPECT_EQ(cudaMalloc(&data, NumElements(shape) * sizeof(float)), cudaSuccess);
  auto storage = std::make_shared<Storage>(data, NumElements(shape) * sizeof(float), Device::kCuda,
                                           [](void* p) { cudaFree(p); });
  return Tensor(std::move(storage), shape, DType::kF32);
}

// Done for every stream on return: a pageable cudaMemcpy may return before its
// DMA on the legacy stream ends, which a non-blocking stream does not wait for.
void Upload(const Tensor& host, const Tensor& device) {
  ASSERT_EQ(cudaMemcpy(device.raw(), host.raw(), host.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

std::vector<float> Download(const Tensor& device) {
  std::vector<float> out(device.numel());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.data(), device.raw(), device.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// Device twins of host TestParams (same names, decay flags and values).
class DeviceParams {
 public:
  explicit DeviceParams(const TestParams& host) {
    for (size_t i = 0; i < host.size(); ++i) {
      auto p = std::make_unique<Parameter>();
      p->name = host[i].name;
      p->decay = host[i].decay;
      p->value = DeviceTensor(host[i].value.shape());
      p->grad = DeviceTensor(host[i].grad.shape());
      Upload(host[i].value, p->value);
      params_.push_back(std::move(p));
    }
    CopyGradsFrom(host);
  }
  void CopyGradsFrom(const TestParams& host) const {
    for (size_t i = 0; i < host.size(); ++i) Upload(host[i].grad, params_[i]->grad);
  }
  ParameterList list() const {
    ParameterList out;
    for (const auto& p : params_) out.push_back(p.get());
    return out;
  }
  std::vector<std::vector<double>> Values() const {
    std::vector<std::vector<double>> out;
    for (const auto& p : params_) {
      std::vector<float> v = Download(p->value);
      out.emplace_back(v.begin(), v.end());
    }
    return out;
  }

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
};

OptimizerConfig Config(OptimizerKind kind, float momentum, bool nesterov, float weight_decay) {
  OptimizerConfig c;
  c.kind = kind;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  if (kind == OptimizerKind::kLamb) c.eps = 1e-6f;
  return c;
}

std::vector<std::vector<double>> StateValues(const Optimizer& opt) {
  std::vector<std::vector<double>> out;
  for (const auto& [name, t] : opt.StateTensors()) {
    EXPECT_EQ(t.device(), Device::kCpu) << name << ": StateTensors must return host copies";
    std::vector<float> v = t.ToVector();
    out.emplace_back(v.begin(), v.end());
  }
  return out;
}

class FusedUpdateTest : public ::testing::TestWithParam<OptimizerConfig> {};

TEST_P(FusedUpdateTest, MatchesTheCpuOptimizerStepForStep) {
  SKIP_WITHOUT_DEVICE();
  const OptimizerConfig config = GetParam();
  TestParams host(StandardSpecs(), 7);
  DeviceParams device(host);
  auto cpu = Optimizer::Create(config, host.list());
  auto gpu = Optimizer::Create(config, device.list());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->device(), Device::kCuda);
  std::mt19937 rng(3);
  constexpr float kLossScale = 1024.0f;
  for (int step = 1; step <= 6; ++step) {
    host.SetGrads(RandomGrads(host, rng, 0.5f), kLossScale);
    device.CopyGradsFrom(host);
    const float lr = 0.05f / step;
    ASSERT_TRUE((*cpu)->Step(lr, 1.0f / kLossScale).ok());
    ASSERT_TRUE((*gpu)->Step(lr, 1.0f / kLossScale).ok());
    EXPECT_LE(MaxRelativeError(device.Values(), host.Values()), 1e-5) << "weights after step " << step;
    EXPECT_LE(MaxRelativeError(StateValues(**gpu), StateValues(**cpu)), 1e-5) << "state after step " << step;
  }
  EXPECT_EQ((*gpu)->step_count(), 6);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, FusedUpdateTest,
    ::testing::Values(Config(OptimizerKind::kSgd, 0.0f, false, 0.0f), Config(OptimizerKind::kSgd, 0.9f, false, 1e-2f),
                      Config(OptimizerKind::kSgd, 0.9f, true, 1e-2f), Config(OptimizerKind::kAdamW, 0.0f, false, 0.1f),
                      Config(OptimizerKind::kLars, 0.9f, false, 1e-3f), Config(OptimizerKind::kLars, 0.0f, false, 0.0f),
                      Config(OptimizerKind::kLamb, 0.0f, false, 0.01f)));

// On the trainer's kind of stream (non-blocking): a layer that replaced a
// grad tensor makes the next Step rebuild the table. Inside a graph capture
// that is refused before anything is enqueued (the capture stays valid);
// eagerly the rebuilt table is copied on the step's stream and used at once.
TEST(FusedUpdateStreamTest, TableRebuildRunsOnTheStepStreamAndIsRefusedInACapture) {
  SKIP_WITHOUT_DEVICE();
  const OptimizerConfig config = Config(OptimizerKind::kAdamW, 0.0f, false, 0.1f);
  TestParams host(StandardSpecs(), 11);
  DeviceParams device(host);
  auto cpu = Optimizer::Create(config, host.list());
  auto gpu = Optimizer::Create(config, device.list());
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  (*gpu)->SetDeviceStep({stream, nullptr});
  std::mt19937 rng(13);
  host.SetGrads(RandomGrads(host, rng, 0.5f), 1.0f);
  device.CopyGradsFrom(host);
  ASSERT_TRUE((*cpu)->Step(0.01f, 1.0f).ok());
  ASSERT_TRUE((*gpu)->Step(0.01f, 1.0f).ok());

  // Parameter 0 gets a new grad tensor with new grads; the old one keeps the
  // old grads (a stale table would read them).
  Parameter* replaced = device.list()[0];
  const Tensor old_grad = replaced->grad;
  replaced->grad = DeviceTensor(old_grad.shape());
  host.SetGrads(RandomGrads(host, rng, 0.5f), 1.0f);
  device.CopyGradsFrom(host);

  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status in_capture = (*gpu)->Step(0.01f, 1.0f);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess) << "the refused rebuild invalidated the capture";
  if (graph != nullptr) cudaGraphDestroy(graph);
  EXPECT_EQ(in_capture.code(), absl::StatusCode::kFailedPrecondition) << in_capture;
  EXPECT_TRUE(absl::StrContains(in_capture.message(), "not possible inside a CUDA graph capture")) << in_capture;
  EXPECT_EQ((*gpu)->step_count(), 1);

  ASSERT_TRUE((*cpu)->Step(0.01f, 1.0f).ok());
  ASSERT_TRUE((*gpu)->Step(0.01f, 1.0f).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_LE(MaxRelativeError(device.Values(), host.Values()), 1e-5);
  EXPECT_LE(MaxRelativeError(StateValues(**gpu), StateValues(**cpu)), 1e-5);
  gpu->reset();
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(FusedUpdateStateTest, LoadStateRoundTripsThroughTheHost) {
  SKIP_WITHOUT_DEVICE();
  TestParams host(StandardSpecs(), 9);
  DeviceParams device(host);
  const OptimizerConfig config = Config(OptimizerKind::kAdamW, 0.0f, false, 0.1f);
  auto a = Optimizer::Create(config, device.list());
  ASSERT_TRUE(a.ok()) << a.status();
  std::mt19937 rng(5);
  host.SetGrads(RandomGrads(host, rng, 1.0f), 1.0f);
  device.CopyGradsFrom(host);
  ASSERT_TRUE((*a)->Step(0.01f, 1.0f).ok());
  NamedTensors saved = (*a)->StateTensors();
  DeviceParams other(host);
  auto b = Optimizer::Create(config, other.list());
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->LoadState(saved, (*a)->step_count()).ok());
  EXPECT_EQ(StateValues(**b), StateValues(**a));
}

// The snapshot path: device state copied into page-locked host buffers the
// caller owns, equal to StateTensors' pageable copies.
TEST(FusedUpdateStateTest, CopyStateTensorsIntoPinnedBuffers) {
  SKIP_WITHOUT_DEVICE();
  TestParams host(StandardSpecs(), 9);
  DeviceParams device(host);
  auto opt = Optimizer::Create(Config(OptimizerKind::kAdamW, 0.0f, false, 0.1f), device.list());
  ASSERT_TRUE(opt.ok()) << opt.status();
  std::mt19937 rng(6);
  host.SetGrads(RandomGrads(host, rng, 1.0f), 1.0f);
  device.CopyGradsFrom(host);
  ASSERT_TRUE((*opt)->Step(0.01f, 1.0f).ok());
  std::vector<void*> pinned;
  auto buffer = [&](const Tensor& like) {
    void* p = nullptr;
    EXPECT_EQ(cudaHostAlloc(&p, like.bytes(), cudaHostAllocDefault), cudaSuccess);
    pinned.push_back(p);
    return Tensor::Wrap(p, like.shape(), DType::kF32, Device::kCpu);
  };
  const NamedTensors copy = (*opt)->CopyStateTensors(buffer);
  const NamedTensors pageable = (*opt)->StateTensors();
  ASSERT_EQ(copy.size(), pageable.size());
  for (size_t i = 0; i < copy.size(); ++i) {
    EXPECT_EQ(copy[i].first, pageable[i].first);
    EXPECT_EQ(copy[i].second.raw(), pinned[i]);
    EXPECT_EQ(copy[i].second.ToVector(), pageable[i].second.ToVector()) << copy[i].first;
  }
  for (void* p : pinned) EXPECT_EQ(cudaFreeHost(p), cudaSuccess);
}

// Device grads of `params` times `scale`, with element `poison` of parameter
// 1 set to +inf when poison >= 0.
void SetDeviceGrads(const TestParams& host, const DeviceParams& device, const std::vector<std::vector<float>>& grads,
                    float scale, int poison) {
  host.SetGrads(grads, scale);
  if (poison >= 0) host[1].grad.f32()[poison] = std::numeric_limits<float>::infinity();
  device.CopyGradsFrom(host);
}

// Host and device twins of the same parameters, an optimizer over each, and
// a device loss scaler driving the device one (on `stream`: the legacy
// default stream unless given).
struct ScaledTwins {
  ScaledTwins(uint32_t seed, const OptimizerConfig& config, const LossScalerConfig& scaler_config,
              cudaStream_t stream = nullptr)
      : host(StandardSpecs(), seed), device(host) {
    auto g = Optimizer::Create(config, device.list());
    auto c = Optimizer::Create(config, host.list());
    auto s = DeviceLossScaler::Create(scaler_config, device.list(), stream);
    EXPECT_TRUE(g.ok() && c.ok() && s.ok());
    if (!g.ok() || !c.ok() || !s.ok()) return;
    gpu = std::move(*g);
    cpu = std::move(*c);
    scaler = std::move(*s);
    gpu->SetDeviceStep({stream, scaler->control()});
  }
  bool ok() const { return gpu && cpu && scaler; }

  TestParams host;
  DeviceParams device;
  std::unique_ptr<Optimizer> gpu, cpu;
  std::unique_ptr<DeviceLossScaler> scaler;
};

TEST(DeviceLossScalerTest, SkipsHalvesAndGrowsOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  LossScalerConfig sc;
  sc.initial_scale = 65536.0f;
  sc.growth_interval = 3;
  ScaledTwins t(21, Config(OptimizerKind::kAdamW, 0.0f, false, 0.01f), sc);
  ASSERT_TRUE(t.ok());
  TestParams& host = t.host;
  DeviceParams& device = t.device;
  std::unique_ptr<Optimizer>*gpu = &t.gpu, *cpu = &t.cpu;
  std::unique_ptr<DeviceLossScaler>* scaler = &t.scaler;
  std::mt19937 rng(8);

  auto device_step = [&](const std::vector<std::vector<float>>& grads, int poison) {
    const float scale = (*scaler)->scale();
    SetDeviceGrads(host, device, grads, scale, poison);
    ASSERT_TRUE((*scaler)->Prologue(/*max_norm=*/0.0f).ok());
    ASSERT_TRUE((*gpu)->Step(0.01f, 1.0f).ok());
    ASSERT_TRUE((*scaler)->Epilogue().ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    (*gpu)->SetStepCount((*scaler)->Snapshot().optimizer_steps);
  };

  // An inf in one grad: nothing changes, the scale halves, the step is counted as skipped.
  const std::vector<std::vector<double>> before = device.Values();
  device_step(RandomGrads(host, rng, 0.1f), /*poison=*/5);
  StepSnapshot s = (*scaler)->Snapshot();
  EXPECT_TRUE(s.skipped);
  EXPECT_EQ(s.scaler.scale, 32768.0f);
  EXPECT_EQ(s.scaler.skipped_steps, 1);
  EXPECT_EQ(s.optimizer_steps, 0);
  EXPECT_EQ(device.Values(), before) << "a skipped step must leave the parameters bitwise unchanged";

  // Three clean steps: applied like the CPU optimizer at the same scale, then x2.
  for (int i = 1; i <= 3; ++i) {
    const auto grads = RandomGrads(host, rng, 0.1f);
    const float scale = (*scaler)->scale();
    device_step(grads, /*poison=*/-1);
    host.SetGrads(grads, scale);
    const double cpu_norm = *GlobalGradNorm(host.list(), 1.0f / scale);
    ASSERT_TRUE((*cpu)->Step(0.01f, 1.0f / scale).ok());
    s = (*scaler)->Snapshot();
    EXPECT_FALSE(s.skipped);
    EXPECT_NEAR(s.grad_norm, cpu_norm, 1e-5 * cpu_norm);
    EXPECT_EQ(s.optimizer_steps, i);
    EXPECT_EQ(s.scaler.scale, i < 3 ? 32768.0f : 65536.0f) << "after clean step " << i;
    EXPECT_EQ(s.scaler.clean_steps, i < 3 ? i : 0);
    EXPECT_LE(MaxRelativeError(device.Values(), host.Values()), 1e-5) << "clean step " << i;
  }
  EXPECT_EQ(s.scaler.skipped_steps, 1);
}

// On the legacy default stream, and on a non-blocking stream as the trainer's
// (the scaler's tables and control block must be copied on it, not on the
// legacy stream it does not wait for).
class DeviceLossScalerStreamTest : public ::testing::TestWithParam<bool> {};

TEST_P(DeviceLossScalerStreamTest, ClipsByTheGlobalNormOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  cudaStream_t stream = nullptr;
  if (GetParam()) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  }
  LossScalerConfig sc;
  sc.enabled = false;  // bf16/fp32: never skips, still clips
  auto t_owner = std::make_unique<ScaledTwins>(4, Config(OptimizerKind::kSgd, 0.9f, false, 0.0f), sc, stream);
  ScaledTwins& t = *t_owner;
  ASSERT_TRUE(t.ok());
  TestParams& host = t.host;
  DeviceParams& device = t.device;
  std::unique_ptr<Optimizer>*gpu = &t.gpu, *cpu = &t.cpu;
  std::unique_ptr<DeviceLossScaler>* scaler = &t.scaler;
  std::mt19937 rng(2);
  host.SetGrads(RandomGrads(host, rng, 1.0f), 1.0f);
  device.CopyGradsFrom(host);
  const double norm = *GlobalGradNorm(host.list(), 1.0f);
  const float max_norm = static_cast<float>(norm / 4);
  ASSERT_TRUE((*scaler)->Prologue(max_norm).ok());
  ASSERT_TRUE((*gpu)->Step(0.1f, 1.0f).ok());
  ASSERT_TRUE((*scaler)->Epilogue().ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE((*cpu)->Step(0.1f, ClipCoefficient(norm, max_norm)).ok());
  EXPECT_NEAR((*scaler)->Snapshot().grad_norm, norm, 1e-5 * norm);
  EXPECT_EQ((*scaler)->Snapshot().scaler.scale, 1.0f);
  EXPECT_LE(MaxRelativeError(device.Values(), host.Values()), 1e-5);
  t_owner.reset();
  if (stream != nullptr) {
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, DeviceLossScalerStreamTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "NonBlocking" : "LegacyDefault");
                         });

// Gradients spread over ranks (ZeRO-1, pipeline): this rank's sum of squares
// all-gathered with two other ranks' (a fake all-gather on one GPU: ranks 0
// and 2 contribute 2.5 and 4.0) and added on the device; the clip and the
// reported norm use the global sum, as the CPU optimizer with the same
// coefficient does.
TEST(DeviceLossScalerTest, SumsTheSumOfSquaresOverRanksOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  LossScalerConfig sc;
  sc.enabled = false;
  ScaledTwins t(9, Config(OptimizerKind::kSgd, 0.9f, false, 0.0f), sc);
  ASSERT_TRUE(t.ok());
  std::mt19937 rng(5);
  t.host.SetGrads(RandomGrads(t.host, rng, 1.0f), 1.0f);
  t.device.CopyGradsFrom(t.host);
  const double local = *GradSumSquares(t.host.list());
  const double others[2] = {2.5, 4.0};
  int gathers = 0;
  auto all_gather = [&](const Tensor& in, const Tensor& out) -> absl::Status {
    ++gathers;
    EXPECT_EQ(in.numel(), 2);
    EXPECT_EQ(out.numel(), 6);
    EXPECT_EQ(in.dtype(), DType::kI32);
    EXPECT_EQ(out.device(), Device::kCuda);
    char* o = static_cast<char*>(out.raw());
    EXPECT_EQ(cudaMemcpy(o, &others[0], 8, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(o + 8, in.raw(), 8, cudaMemcpyDeviceToDevice), cudaSuccess);  // this rank: 1
    EXPECT_EQ(cudaMemcpy(o + 16, &others[1], 8, cudaMemcpyHostToDevice), cudaSuccess);
    return absl::OkStatus();
  };
  const double norm = std::sqrt(local + others[0] + others[1]);
  const float max_norm = static_cast<float>(norm / 3);
  ASSERT_TRUE(t.scaler->LocalSumSquares().ok());
  ASSERT_TRUE(t.scaler->SumSquaresOverRanks(3, all_gather).ok());
  ASSERT_TRUE(t.scaler->Decide(max_norm).ok());
  ASSERT_TRUE(t.gpu->Step(0.1f, 1.0f).ok());
  ASSERT_TRUE(t.scaler->Epilogue().ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(gathers, 1);
  ASSERT_TRUE(t.cpu->Step(0.1f, ClipCoefficient(norm, max_norm)).ok());
  EXPECT_NEAR(t.scaler->Snapshot().grad_norm, norm, 1e-5 * norm);
  EXPECT_LE(MaxRelativeError(t.device.Values(), t.host.Values()), 1e-5);
  // One rank: nothing to gather.
  ASSERT_TRUE(t.scaler->SumSquaresOverRanks(1, all_gather).ok());
  EXPECT_EQ(gathers, 1);
  EXPECT_EQ(t.scaler->SumSquaresOverRanks(0, all_gather).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ringmaster::engine::optim
