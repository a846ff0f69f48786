// ZeroOptimizer on CUDA tensors over NCCL (2 GPUs, one thread per rank)
// against its CPU twin (CpuBackend, in-process group) on the same parameters
// and per-rank gradients: three SGD-momentum steps end with the same weights
// (1e-5 relative, fp32) on every rank, and GradSumSquares (the shard copied
// back, the partial sums all-gathered on the device) gives the same global sum
// (1e-6 relative). The CUDA backends run with an fp32 and with a bf16 compute
// dtype: parameters, their gradients, the optimizer state and the reduced
// shards are f32 whatever the activations are stored in (engine/core/
// backend.h), so both give the fp32 results. Skips where fewer than 2 GPUs
// exist: NCCL needs a distinct device per rank of a communicator.
#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "engine/core/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/dist/in_process_group.h"
#include "engine/dist/nccl_fake_store.h"
#include "engine/dist/nccl_process_group.h"
#include "engine/parallel/zero.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::parallel {
namespace {

constexpr int kRanks = 2;
constexpr int kSteps = 3;
const std::vector<int64_t> kSizes = {5, 7, 2};  // T = 14, S = 7: a shard ends inside a parameter

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::vector<float> Random(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Initial values (the same on every rank) and grads per step and rank.
struct Inputs {
  std::vector<std::vector<float>> values;
  std::vector<std::vector<std::vector<std::vector<float>>>> grads;  // [step][rank][param]
};

Inputs MakeInputs() {
  std::mt19937 rng(17);
  Inputs in;
  for (int64_t n : kSizes) in.values.push_back(Random(rng, n));
  in.grads.resize(kSteps);
  for (auto& step : in.grads) {
    step.resize(kRanks);
    for (auto& rank : step)
      for (int64_t n : kSizes) rank.push_back(Random(rng, n));
  }
  return in;
}

optim::OptimizerConfig Sgd() {
  optim::OptimizerConfig c;
  c.kind = optim::OptimizerKind::kSgd;
  c.lr = 0.1f;
  c.momentum = 0.9f;
  c.weight_decay = 1e-3f;
  return c;
}

struct RankResult {
  std::vector<std::vector<float>> values;
  std::vector<double> sum_squares;  // per step
};

// One rank's three steps on `backend`'s device.
// `stream`: the CUDA backend's compute stream, where the optimizer's kernels go (CPU: null).
void RunRank(const Inputs& in, int rank, dist::ProcessGroup& group, Backend& backend, RankResult* out,
             void* stream = nullptr) {
  std::vector<Parameter> params(kSizes.size());
  ParameterList list;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    params[i].name = "p" + std::to_string(i);
    params[i].value = backend.ToDevice(Tensor::FromVector({kSizes[i]}, in.values[i]));
    params[i].grad = backend.Zeros({kSizes[i]});
    list.push_back(&params[i]);
  }
  auto zero = ZeroOptimizer::Create(Sgd(), list, group, backend);
  ASSERT_TRUE(zero.ok()) << zero.status();
  if (stream != nullptr) (*zero)->optimizer().SetDeviceStep({stream, nullptr});
  for (int s = 0; s < kSteps; ++s) {
    for (size_t i = 0; i < kSizes.size(); ++i) {
      backend.CopyFromHost(Tensor::FromVector({kSizes[i]}, in.grads[s][rank][i]), params[i].grad);
    }
    ASSERT_TRUE((*zero)->ReduceScatterGradients().ok());
    auto sum = (*zero)->GradSumSquares();
    ASSERT_TRUE(sum.ok()) << sum.status();
    out->sum_squares.push_back(*sum);
    ASSERT_TRUE((*zero)->Step(Sgd().lr, 1.0f).ok());
    (*zero)->ZeroGrad();
  }
  ASSERT_TRUE(backend.Synchronize().ok());
  for (Parameter& p : params) out->values.push_back(backend.ToHost(p.value).ToVector());
}

double MaxRelDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    double diff = 0.0, norm = 0.0;
    for (size_t k = 0; k < a[i].size(); ++k) {
      diff += (static_cast<double>(a[i][k]) - b[i][k]) * (static_cast<double>(a[i][k]) - b[i][k]);
      norm += static_cast<double>(b[i][k]) * b[i][k];
    }
    worst = std::max(worst, std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30));
  }
  return worst;
}

std::vector<RankResult> RunCpuTwin(const Inputs& in) {
  std::vector<RankResult> cpu(kRanks);
  auto world = dist::InProcessWorld::Create(kRanks, {"dp", absl::Seconds(30)});
  CpuBackend backend(CpuBackendConfig{1, DType::kF32});
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
      RunRank(in, r, *group, backend, &cpu[r]);
    });
  }
  for (std::thread& t : threads) t.join();
  return cpu;
}

// The reference half runs everywhere: the ranks agree and the steps move the weights.
TEST(ZeroNcclTest, CpuTwinAgreesAcrossRanks) {
  const Inputs in = MakeInputs();
  const std::vector<RankResult> cpu = RunCpuTwin(in);
  ASSERT_EQ(cpu[0].values.size(), kSizes.size());
  EXPECT_EQ(cpu[1].values, cpu[0].values);
  EXPECT_EQ(cpu[1].sum_squares, cpu[0].sum_squares);
  EXPECT_GT(MaxRelDiff(cpu[0].values, in.values), 1e-3) << "the steps moved nothing";
}

// Every rank's steps on its own GPU, the backends computing in compute_dtype.
std::vector<RankResult> RunGpuRanks(const Inputs& in, DType compute_dtype) {
  std::vector<RankResult> gpu(kRanks);
  dist::testing::FakeStore store;
  dist::StoreUniqueIdExchange ids(&store);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      CudaBackendConfig config;
      config.device = r;
      config.compute_dtype = compute_dtype;
      auto backend = CudaBackend::Create(config);
      ASSERT_TRUE(backend.ok()) << backend.status();
      dist::NcclGroupOptions options;
      options.rank = r;
      options.size = kRanks;
      options.device = r;
      options.timeout = absl::Seconds(60);
      options.communicator = "zero";
      options.name = "dp";
      auto group = dist::NcclProcessGroup::Create(&ids, options);
      ASSERT_TRUE(group.ok()) << group.status();
      (*group)->SetComputeStream((*backend)->compute_stream());
      RunRank(in, r, **group, **backend, &gpu[r], (*backend)->compute_stream());
    });
  }
  for (std::thread& t : threads) t.join();
  return gpu;
}

TEST(ZeroNcclTest, MatchesTheCpuTwinOnEveryRank) {
  if (DeviceCount() < kRanks) {
    GTEST_SKIP() << "fewer than " << kRanks << " CUDA devices (" << DeviceCount()
                 << "): ZeRO-1 over NCCL needs one GPU per rank; not exercised";
  }
  const Inputs in = MakeInputs();
  const std::vector<RankResult> cpu = RunCpuTwin(in);
  for (DType compute_dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(compute_dtype));
    const std::vector<RankResult> gpu = RunGpuRanks(in, compute_dtype);
    for (int r = 0; r < kRanks; ++r) {
      SCOPED_TRACE(r);
      ASSERT_EQ(gpu[r].values.size(), kSizes.size());
      ASSERT_EQ(cpu[r].values.size(), kSizes.size());
      EXPECT_EQ(gpu[r].values, gpu[0].values) << "the ranks' weights differ";
      const double diff = MaxRelDiff(gpu[r].values, cpu[r].values);
      EXPECT_LE(diff, 1e-5);
      EXPECT_GT(MaxRelDiff(cpu[r].values, in.values), 1e-3) << "the steps moved nothing";
      for (int s = 0; s < kSteps; ++s) {
        EXPECT_NEAR(gpu[r].sum_squares[s], cpu[r].sum_squares[s], 1e-6 * cpu[r].sum_squares[s]);
      }
      std::printf("%s, rank %d: CUDA/NCCL weights within %.3g of the CPU twin\n", DTypeName(compute_dtype), r,
                  diff);
    }
  }
}

}  // namespace
}  // namespace ringmaster::engine::parallel
