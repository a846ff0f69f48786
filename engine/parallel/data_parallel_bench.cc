// Data-parallel step time with and without overlapping the bucket allreduces
// with the backward pass, and ZeRO-1's optimizer state per rank, on threads
// (InProcessGroup: the "network" is memory, so communication is cheap and
// the ranks share the machine's cores — a measurement of the mechanism, not
// of a cluster).
//
//   bazel run -c opt //engine/parallel:data_parallel_bench -- [ranks] [steps]
//
// Model: MLP 784 -> 1024 -> 1024 -> 10 (1.86 M parameters, 7.5 MB of fp32
// gradient), batch 64 per rank, SGD with momentum, one backend thread per
// rank. Step = forward + DataParallel::Backward + FinishGradients + Step.
// Reported per configuration: median step time, and rank 0's mean per step
// of communication seconds (an allreduce's time includes waiting for the
// peer to join), seconds blocked in FinishGradients, and overlap fraction.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "common/status_macros.h"
#include "engine/core/cpu_backend.h"
#include "engine/dist/in_process_group.h"
#include "engine/nn/loss.h"
#include "engine/nn/model_factory.h"
#include "engine/parallel/data_parallel.h"
#include "engine/parallel/zero.h"

namespace ringmaster::engine::parallel {
namespace {

nn::ModelConfig BenchModel() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kMlp;
  c.hidden_sizes = {1024, 1024};
  return c;
}

struct Measurement {
  double median_step_seconds = 0.0;
  CommStats stats;
};

std::vector<absl::Status> RunRanks(const std::shared_ptr<dist::InProcessWorld>& world,
                                   const std::function<absl::Status(dist::ProcessGroup&)>& body) {
  std::vector<absl::Status> statuses(world->size());
  std::vector<std::unique_ptr<dist::InProcessGroup>> groups;
  for (int r = 0; r < world->size(); ++r) groups.push_back(world->Group(r));
  std::vector<std::thread> threads;
  for (int r = 0; r < world->size(); ++r) threads.emplace_back([&, r] { statuses[r] = body(*groups[r]); });
  for (auto& t : threads) t.join();
  return statuses;
}

absl::StatusOr<Measurement> MeasureSteps(int ranks, int steps, const DataParallelOptions& options) {
  auto world = dist::InProcessWorld::Create(ranks, {"dp", absl::Seconds(120)});
  Measurement m;
  std::vector<absl::Status> statuses = RunRanks(world, [&](dist::ProcessGroup& group) -> absl::Status {
    CpuBackend backend(CpuBackendConfig{1, DType::kF32});
    ASSIGN_OR_RETURN(auto model, nn::BuildModel(BenchModel(), backend));
    nn::SoftmaxCrossEntropy loss(backend);
    ASSIGN_OR_RETURN(auto dp, DataParallel::Create(*model, group, options));
    RETURN_IF_ERROR(dp->BroadcastParameters());
    optim::OptimizerConfig oc;
    ASSIGN_OR_RETURN(auto optimizer, optim::Optimizer::Create(oc, model->Parameters()));
    Tensor x = backend.Zeros({64, 1, 28, 28});
    backend.Fill(x, 0.1f * (group.rank() + 1));
    std::vector<int32_t> labels(64);
    for (int i = 0; i < 64; ++i) labels[i] = i % 10;
    const Tensor targets = Tensor::FromInts({64}, labels);
    std::vector<double> times;
    for (int s = 0; s < steps + 1; ++s) {  // the first step warms up
      RETURN_IF_ERROR(group.Barrier());
      const auto start = std::chrono::steady_clock::now();
      ASSIGN_OR_RETURN(Tensor logits, model->Forward(x, true));
      RETURN_IF_ERROR(loss.Forward(logits, targets, true).status());
      ASSIGN_OR_RETURN(Tensor dl, loss.Backward());
      RETURN_IF_ERROR(dp->Backward(dl).status());
      RETURN_IF_ERROR(dp->FinishGradients());
      RETURN_IF_ERROR(optimizer->Step(0.01f, 1.0f));
      optimizer->ZeroGrad();
      if (s == 0) continue;
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (group.rank() == 0) {  // means over the timed steps
        const CommStats& last = dp->last_stats();
        m.stats.buckets = last.buckets;
        m.stats.comm_seconds += last.comm_seconds / steps;
        m.stats.wait_seconds += last.wait_seconds / steps;
        m.stats.overlap_fraction += last.overlap_fraction / steps;
      }
    }
    if (group.rank() == 0) {
      std::sort(times.begin(), times.end());
      m.median_step_seconds = times[times.size() / 2];
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) RETURN_IF_ERROR(s);
  return m;
}

absl::Status ReportZeroState(int ranks) {
  auto world = dist::InProcessWorld::Create(ranks, {"dp", absl::Seconds(120)});
  std::vector<size_t> zero_bytes(ranks);
  size_t plain_bytes = 0;
  optim::OptimizerConfig oc;
  oc.kind = optim::OptimizerKind::kAdamW;
  std::vector<absl::Status> statuses = RunRanks(world, [&](dist::ProcessGroup& group) -> absl::Status {
    CpuBackend backend(CpuBackendConfig{1, DType::kF32});
    ASSIGN_OR_RETURN(auto model, nn::BuildModel(BenchModel(), backend));
    ASSIGN_OR_RETURN(auto zero, ZeroOptimizer::Create(oc, model->Parameters(), group, backend));
    zero_bytes[group.rank()] = zero->StateBytes();
    if (group.rank() == 0) {
      ASSIGN_OR_RETURN(auto plain, optim::Optimizer::Create(oc, model->Parameters()));
      plain_bytes = plain->StateBytes();
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) RETURN_IF_ERROR(s);
  std::printf("ZeRO-1 AdamW state, %d ranks: plain %zu bytes per rank; sharded", ranks, plain_bytes);
  for (size_t b : zero_bytes) std::printf(" %zu", b);
  std::printf(" (%.4f of plain on rank 0)\n", static_cast<double>(zero_bytes[0]) / plain_bytes);
  return absl::OkStatus();
}

absl::Status Main(int ranks, int steps) {
  std::printf("DataParallel, %d ranks (threads), MLP 784-1024-1024-10, batch 64 per rank, %d steps\n", ranks, steps);
  std::printf("%-34s %10s %10s %10s %8s\n", "configuration", "step ms", "comm ms", "wait ms", "overlap");
  struct Config {
    const char* name;
    int64_t bucket_bytes;
    bool overlap;
    GradCompression compression;
  };
  const Config configs[] = {
      {"25 MB bucket, overlap", 25 << 20, true, GradCompression::kNone},
      {"25 MB bucket, no overlap", 25 << 20, false, GradCompression::kNone},
      {"1 MB buckets, overlap", 1 << 20, true, GradCompression::kNone},
      {"1 MB buckets, no overlap", 1 << 20, false, GradCompression::kNone},
      {"1 MB buckets, overlap, bf16", 1 << 20, true, GradCompression::kBf16},
  };
  for (const Config& c : configs) {
    DataParallelOptions options;
    options.bucket_bytes = c.bucket_bytes;
    options.overlap = c.overlap;
    options.compression = c.compression;
    ASSIGN_OR_RETURN(Measurement m, MeasureSteps(ranks, steps, options));
    std::printf("%-34s %10.2f %10.2f %10.2f %8.2f  (%d buckets)\n", c.name, 1e3 * m.median_step_seconds,
                1e3 * m.stats.comm_seconds, 1e3 * m.stats.wait_seconds, m.stats.overlap_fraction, m.stats.buckets);
  }
  for (int n : {2, 4}) RETURN_IF_ERROR(ReportZeroState(n));
  return absl::OkStatus();
}

}  // namespace
}  // namespace ringmaster::engine::parallel

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  absl::Status status = ringmaster::engine::parallel::Main(std::max(ranks, 1), std::max(steps, 1));
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
