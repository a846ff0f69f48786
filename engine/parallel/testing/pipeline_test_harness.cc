#include "engine/parallel/testing/pipeline_test_harness.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/random.h"
#include "engine/core/test_util.h"
#include "engine/dist/in_process_group.h"
#include "engine/nn/loss.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/grid.h"
#include "engine/parallel/pipeline.h"
#include "engine/parallel/testing/pipeline_rendezvous_group.h"

namespace ringmaster::engine::parallel::testing {
namespace {

optim::OptimizerConfig Sgd(float lr) {
  optim::OptimizerConfig c;
  c.kind = optim::OptimizerKind::kSgd;
  c.lr = lr;
  c.momentum = 0.9f;
  return c;
}

std::unique_ptr<CpuBackend> OneThreadBackend() {
  CpuBackendConfig c;
  c.num_threads = 1;
  return std::make_unique<CpuBackend>(c);
}

// Rows [d B / D, (d + 1) B / D) of every tensor of the batch.
Batch Shard(const Batch& batch, int d, int num) {
  Batch out = batch;
  const int64_t rows = batch.size() / num;
  for (auto [from, to] : {std::pair{&batch.images, &out.images}, std::pair{&batch.tokens, &out.tokens},
                          std::pair{&batch.targets, &out.targets}}) {
    if (from->defined()) *to = from->Rows(d * rows, (d + 1) * rows);
  }
  return out;
}

// The results of all ranks, merged by name; records how far copies of the
// same value (tied parameters, replicas, reported losses) differ. Thread-safe.
class Collector {
 public:
  void Record(NamedValues* into, const std::string& name, std::vector<float> values) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = into->emplace(name, values);
    if (!inserted) Compare(it->second, values);
  }
  void RecordLoss(RunResult* result, size_t step, float loss) {
    std::lock_guard<std::mutex> lock(mu_);
    if (result->losses.size() <= step) result->losses.resize(step + 1, std::nanf(""));
    if (std::isnan(result->losses[step])) {
      result->losses[step] = loss;
    } else {
      Compare({result->losses[step]}, {loss});
    }
  }
  void Fail(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = status;
  }
  absl::Status status() const { return status_; }
  double mismatch() const { return mismatch_; }

 private:
  void Compare(const std::vector<float>& a, const std::vector<float>& b) {
    mismatch_ = std::max(mismatch_, engine::testing::MaxAbsDiff(a, b));
  }
  std::mutex mu_;
  absl::Status status_;
  double mismatch_ = 0.0;
};

absl::Status RunRank(const PipelineRunConfig& config, const std::vector<Batch>& batches, dist::ProcessGroup& world,
                     Collector& collector, RunResult& result) {
  const int p = static_cast<int>(config.stages.size());
  ASSIGN_OR_RETURN(GridLayout layout, GridLayout::Create(world.size(), config.data, p));
  ASSIGN_OR_RETURN(std::unique_ptr<Grid> grid, Grid::Create(world, config.data, p, layout.CoordOf(world.rank())));
  std::unique_ptr<dist::ProcessGroup> rendezvous;
  dist::ProcessGroup* pipeline_group = &grid->pipeline_group();
  if (config.rendezvous) {
    rendezvous = std::make_unique<PipelineRendezvousGroup>(grid->pipeline_group());
    pipeline_group = rendezvous.get();
  }
  std::unique_ptr<CpuBackend> backend = OneThreadBackend();
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::BuildModel(config.model, *backend));
  PipelineConfig pc;
  pc.stages = config.stages;
  pc.schedule = config.schedule;
  pc.micro_batches = config.micro_batches;
  ASSIGN_OR_RETURN(std::unique_ptr<PipelineStage> stage, PipelineStage::Create(*model, *pipeline_group, pc));
  ParameterList params = stage->Parameters();
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> opt, optim::Optimizer::Create(Sgd(config.lr), params));
  const GridCoord coord = grid->coord();
  for (size_t k = 0; k < batches.size(); ++k) {
    opt->ZeroGrad();
    PipelineStepOptions options;
    options.rng_key = k;
    ASSIGN_OR_RETURN(PipelineStepResult step, stage->Step(Shard(batches[k], coord.data, config.data), options));
    Tensor loss = Tensor::FromVector({1}, {step.loss});
    if (config.data > 1) {
      for (Parameter* param : params) RETURN_IF_ERROR(grid->data_group().AllReduce(param->grad, dist::ReduceOp::kAvg));
      RETURN_IF_ERROR(grid->data_group().AllReduce(loss, dist::ReduceOp::kAvg));
    }
    collector.RecordLoss(&result, k, loss.ToVector()[0]);
    if (k == 0) {
      for (Parameter* param : params) collector.Record(&result.first_grads, param->name, param->grad.ToVector());
      if (coord.data == 0) result.peak_in_flight[coord.stage] = step.peak_in_flight;
    }
    RETURN_IF_ERROR(opt->Step(config.lr, 1.0f));
  }
  for (Parameter* param : params) collector.Record(&result.weights, param->name, param->value.ToVector());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunResult> RunPipeline(const PipelineRunConfig& config, const std::vector<Batch>& batches) {
  const int world_size = config.data * static_cast<int>(config.stages.size());
  dist::InProcessOptions options;
  options.name = "world";
  options.timeout = absl::Seconds(60);
  std::shared_ptr<dist::InProcessWorld> world = dist::InProcessWorld::Create(world_size, options);
  RunResult result;
  result.peak_in_flight.assign(config.stages.size(), 0);
  Collector collector;
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<dist::InProcessGroup> group = world->Group(r);
      absl::Status s = RunRank(config, batches, *group, collector, result);
      if (!s.ok()) collector.Fail(absl::Status(s.code(), absl::StrCat("rank ", r, ": ", s.message())));
    });
  }
  for (std::thread& t : threads) t.join();
  RETURN_IF_ERROR(collector.status());
  result.copy_mismatch = collector.mismatch();
  return result;
}

absl::StatusOr<RunResult> RunReference(const nn::ModelConfig& model_config, const std::vector<Batch>& batches,
                                       float lr, int accumulate) {
  std::unique_ptr<CpuBackend> backend = OneThreadBackend();
  ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::BuildModel(model_config, *backend));
  nn::SoftmaxCrossEntropy loss_fn(*backend);
  ParameterList params = model->Parameters();
  ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> opt, optim::Optimizer::Create(Sgd(lr), params));
  RunResult result;
  for (size_t k = 0; k < batches.size(); ++k) {
    opt->ZeroGrad();
    float loss_sum = 0.0f;
    for (int i = 0; i < accumulate; ++i) {
      Batch mb = accumulate == 1 ? batches[k] : MicroBatch(batches[k], accumulate, i);
      model->SetRngKey(k * accumulate + i);
      const Tensor& input = mb.tokens.defined() ? mb.tokens : mb.images;
      ASSIGN_OR_RETURN(Tensor logits, model->Forward(input, /*training=*/true));
      ASSIGN_OR_RETURN(Tensor loss, loss_fn.Forward(logits, mb.targets, true, 1.0f / accumulate));
      ASSIGN_OR_RETURN(Tensor dlogits, loss_fn.Backward());
      RETURN_IF_ERROR(model->Backward(dlogits).status());
      loss_sum += loss.ToVector()[0] / accumulate;
    }
    result.losses.push_back(loss_sum);
    if (k == 0) {
      for (Parameter* p : params) result.first_grads[p->name] = p->grad.ToVector();
    }
    RETURN_IF_ERROR(opt->Step(lr, 1.0f));
  }
  for (Parameter* p : params) result.weights[p->name] = p->value.ToVector();
  return result;
}

Batch RandomImageBatch(const nn::ModelConfig& model, int64_t size, uint64_t seed) {
  Batch b;
  b.images = engine::testing::RandomTensor({size, model.input_channels, model.input_height, model.input_width}, seed);
  Rng rng(seed + 1);
  std::vector<int32_t> targets(size);
  for (int32_t& t : targets) t = static_cast<int32_t>(rng.Next() % model.num_classes);
  b.targets = Tensor::FromInts({size}, targets);
  return b;
}

Batch RandomTokenBatch(const nn::ModelConfig& model, int64_t size, int64_t seq_len, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> tokens(size * seq_len), targets(size * seq_len);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng.Next() % model.vocab_size);
  for (int32_t& t : targets) t = static_cast<int32_t>(rng.Next() % model.vocab_size);
  Batch b;
  b.tokens = Tensor::FromInts({size, seq_len}, tokens);
  b.targets = Tensor::FromInts({size, seq_len}, targets);
  return b;
}

double MaxRelDiff(const NamedValues& got, const NamedValues& want, std::string* worst) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double max = 0.0;
  for (const auto& [name, values] : want) {
    auto it = got.find(name);
    if (it == got.end()) return std::numeric_limits<double>::infinity();
    double d = engine::testing::MaxRelDiff(it->second, values);
    if (d >= max) {
      max = d;
      if (worst != nullptr) *worst = name;
    }
  }
  return max;
}

}  // namespace ringmaster::engine::parallel::testing
