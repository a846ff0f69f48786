#include "engine/parallel/testing/dp_harness.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/random.h"
#include "engine/dist/in_process_group.h"
#include "engine/nn/loss.h"
#include "engine/parallel/zero.h"

namespace ringmaster::engine::parallel::testing {
namespace {

struct GlobalBatch {
  Tensor input;    // images f32 [B, C, H, W] or tokens i32 [B, T]
  Tensor targets;  // i32 [B] or [B, T]
};

GlobalBatch MakeBatch(const Job& job, int step) {
  Rng rng(job.data_seed * 1000003 + step);
  const nn::ModelConfig& m = job.model;
  const int64_t b = job.global_batch;
  GlobalBatch batch;
  if (m.kind == nn::ModelKind::kGpt) {
    std::vector<int32_t> tokens(b * (job.sequence_length + 1));
    for (int32_t& t : tokens) t = static_cast<int32_t>(rng.Next() % m.vocab_size);
    std::vector<int32_t> in, next;
    for (int64_t i = 0; i < b; ++i) {
      for (int t = 0; t < job.sequence_length; ++t) {
        in.push_back(tokens[i * (job.sequence_length + 1) + t]);
        next.push_back(tokens[i * (job.sequence_length + 1) + t + 1]);
      }
    }
    batch.input = Tensor::FromInts({b, job.sequence_length}, in);
    batch.targets = Tensor::FromInts({b, job.sequence_length}, next);
    return batch;
  }
  const Shape shape = {b, m.input_channels, m.input_height, m.input_width};
  std::vector<float> pixels(NumElements(shape));
  for (float& p : pixels) p = static_cast<float>(rng.Uniform(-1.0, 1.0));
  std::vector<int32_t> labels(b);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng.Next() % m.num_classes);
  batch.input = Tensor::FromVector(shape, pixels);
  batch.targets = Tensor::FromInts({b}, labels);
  return batch;
}

// One rank's training run; fills its entries of `result`.
absl::Status RankMain(dist::ProcessGroup& group, const Job& job, const Layout& layout, Result* result) {
  CpuBackend backend(CpuBackendConfig{1, DType::kF32});
  nn::ModelConfig config = job.model;
  if (group.rank() != 0) config.seed += 1000 + group.rank();  // differs until broadcast
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::BuildModel(config, backend));
  nn::SoftmaxCrossEntropy loss(backend);
  std::unique_ptr<DataParallel> dp;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<ZeroOptimizer> zero;
  const Reduction reduction = layout.reduction;
  if (reduction == Reduction::kZero) {
    RETURN_IF_ERROR(BroadcastModelState(*model, group, 0));
    ASSIGN_OR_RETURN(zero, ZeroOptimizer::Create(job.optimizer, model->Parameters(), group, backend));
  } else {
    if (reduction != Reduction::kNone) {
      ASSIGN_OR_RETURN(dp, DataParallel::Create(*model, group, layout.dp));
      RETURN_IF_ERROR(dp->BroadcastParameters());
    }
    ASSIGN_OR_RETURN(optimizer, optim::Optimizer::Create(job.optimizer, model->Parameters()));
  }
  const int64_t local = job.global_batch / layout.world, micro = local / layout.micro_steps;
  for (int step = 0; step < job.steps; ++step) {
    const GlobalBatch batch = MakeBatch(job, step);
    model->SetRngKey(step);
    for (int k = 0; k < layout.micro_steps; ++k) {
      const int64_t begin = group.rank() * local + k * micro;
      ASSIGN_OR_RETURN(Tensor logits, model->Forward(batch.input.Rows(begin, begin + micro), true));
      RETURN_IF_ERROR(
          loss.Forward(logits, batch.targets.Rows(begin, begin + micro), true, 1.0f / layout.micro_steps).status());
      ASSIGN_OR_RETURN(Tensor dlogits, loss.Backward());
      if (reduction == Reduction::kDataParallel) {
        RETURN_IF_ERROR(dp->Backward(dlogits, /*sync=*/k == layout.micro_steps - 1).status());
      } else {
        RETURN_IF_ERROR(model->Backward(dlogits).status());
      }
    }
    if (reduction == Reduction::kZero) {
      RETURN_IF_ERROR(zero->ReduceScatterGradients());
      RETURN_IF_ERROR(zero->Step(job.optimizer.lr, 1.0f));
      zero->ZeroGrad();
      continue;
    }
    if (reduction == Reduction::kDataParallel) RETURN_IF_ERROR(dp->FinishGradients());
    if (reduction == Reduction::kAfterBackward) RETURN_IF_ERROR(dp->ReduceGradients());
    RETURN_IF_ERROR(optimizer->Step(job.optimizer.lr, 1.0f));
    optimizer->ZeroGrad();
  }
  std::vector<std::vector<float>>& weights = result->weights[group.rank()];
  for (const Parameter* p : model->Parameters()) weights.push_back(p->value.ToVector());
  result->state_bytes[group.rank()] = zero != nullptr ? zero->StateBytes() : optimizer->StateBytes();
  if (dp != nullptr && group.rank() == 0) result->last_stats = dp->last_stats();
  return absl::OkStatus();
}

}  // namespace

std::vector<absl::Status> RunRanks(const std::shared_ptr<dist::InProcessWorld>& world,
                                   const std::function<absl::Status(dist::ProcessGroup&)>& body) {
  std::vector<absl::Status> statuses(world->size());
  std::vector<std::unique_ptr<dist::InProcessGroup>> groups;
  for (int r = 0; r < world->size(); ++r) groups.push_back(world->Group(r));
  std::vector<std::thread> threads;
  for (int r = 0; r < world->size(); ++r) {
    threads.emplace_back([&, r] { statuses[r] = body(*groups[r]); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

nn::ModelConfig SmallMlp() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kMlp;
  c.seed = 11;
  c.input_height = c.input_width = 8;
  c.hidden_sizes = {128, 64};
  return c;
}

nn::ModelConfig SmallCnn(int64_t bn_ghost_batch) {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kCnn;
  c.seed = 12;
  c.input_height = c.input_width = 8;
  c.conv_channels = {4, 8};
  c.cnn_hidden_sizes = {32};
  c.bn_ghost_batch = bn_ghost_batch;
  return c;
}

nn::ModelConfig SmallGpt() {
  nn::ModelConfig c;
  c.kind = nn::ModelKind::kGpt;
  c.seed = 13;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 8;
  c.vocab_size = 64;
  return c;
}

absl::StatusOr<Result> Train(const Job& job, const Layout& layout) {
  if (layout.world <= 0 || layout.micro_steps <= 0 || job.global_batch % (layout.world * layout.micro_steps) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("layout D=", layout.world, " m=", layout.micro_steps,
                                                   " does not divide the batch of ", job.global_batch));
  }
  if (layout.reduction == Reduction::kNone && layout.world != 1) {
    return absl::InvalidArgumentError("the single-process reference has one rank");
  }
  dist::InProcessOptions options;
  options.name = "dp";
  options.timeout = absl::Seconds(60);
  auto world = dist::InProcessWorld::Create(layout.world, options);
  Result result;
  result.weights.resize(layout.world);
  result.state_bytes.resize(layout.world);
  std::vector<absl::Status> statuses =
      RunRanks(world, [&](dist::ProcessGroup& group) { return RankMain(group, job, layout, &result); });
  for (int r = 0; r < layout.world; ++r) {
    if (!statuses[r].ok())
      return absl::Status(statuses[r].code(), absl::StrCat("rank ", r, ": ", statuses[r].message()));
  }
  return result;
}

double MaxRelDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return INFINITY;
    double diff = 0.0, scale = 0.0;
    for (size_t j = 0; j < a[i].size(); ++j) {
      diff = std::max(diff, std::fabs(static_cast<double>(a[i][j]) - b[i][j]));
      scale = std::max(scale, std::fabs(static_cast<double>(b[i][j])));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-6));
  }
  return worst;
}

}  // namespace ringmaster::engine::parallel::testing
