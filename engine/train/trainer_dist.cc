// Trainer: the parallel layout (grid, pipeline stage, data parallelism, ZeRO-1)
// and the collectives of a step, and the gathering of the model and the
// optimizer state that evaluation and checkpoints need.
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/parallel/grad_spread.h"
#include "engine/parallel/stage_partition_cost.h"
#include "engine/train/trainer.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

// The optimizer's state slots, as Optimizer::StateTensors names them.
std::vector<std::string> StateSlots(const optim::OptimizerConfig& config) {
  switch (config.kind) {
    case optim::OptimizerKind::kAdamW:
    case optim::OptimizerKind::kLamb:
      return {"exp_avg", "exp_avg_sq"};
    case optim::OptimizerKind::kSgd:
    case optim::OptimizerKind::kLars:
      if (config.momentum > 0) return {"momentum_buffer"};
  }
  return {};
}

std::string StateName(const std::string& slot, const std::string& param) { return slot + "." + param; }

const Tensor* Find(const optim::NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

}  // namespace

absl::Status Trainer::ResolveLayout() {
  ParallelConfig& par = config_.parallel;
  const int world = distributed() ? world_->size() : 1;
  if (world > 1 && par.data * par.pipeline != world) {
    if (world % par.pipeline != 0) {
      return absl::InvalidArgumentError(absl::StrCat("parallelism.pipeline: ", par.pipeline,
                                                     " stages do not divide the ", world, " ranks"));
    }
    par.data = world / par.pipeline;
    if (world_->rank() == 0) spdlog::info("parallelism.data set to {} for {} ranks", par.data, world);
  }
  const int64_t per_micro = static_cast<int64_t>(par.data) * par.micro_batches;
  if (config_.data.global_batch % per_micro != 0) {
    return absl::InvalidArgumentError(absl::StrCat("data.batch_size: global batch ", config_.data.global_batch,
                                                   " is not divisible by data-parallel size (", par.data,
                                                   ") x micro-batches (", par.micro_batches, ")"));
  }
  // Each rank normalises its own micro-batch (ghost batch norm) in every
  // layout, one process included: all layouts of a spec compute the same.
  config_.model.bn_ghost_batch = config_.data.global_batch / per_micro;
  return absl::OkStatus();
}

absl::Status Trainer::SetUpParallelism() {
  if (!distributed()) {
    ASSIGN_OR_RETURN(optimizer_, optim::Optimizer::Create(config_.optimizer, model_->Parameters(), DeviceZeros()));
    return absl::OkStatus();
  }
  const ParallelConfig& par = config_.parallel;
  ASSIGN_OR_RETURN(grid_, parallel::Grid::Create(*world_, par.data, par.pipeline, options_.coord));
  int begin = 0, end = model_->num_blocks();
  if (par.pipeline > 1) {
    ASSIGN_OR_RETURN(stages_, parallel::PartitionModel(config_.model, model_->num_blocks(), par.pipeline,
                                                       par.stage_boundaries));
    parallel::PipelineConfig pipeline;
    pipeline.stages = stages_;
    pipeline.schedule = par.schedule;
    pipeline.micro_batches = par.micro_batches;
    ASSIGN_OR_RETURN(pipeline_, parallel::PipelineStage::Create(*model_, grid_->pipeline_group(), pipeline));
    begin = pipeline_->range().begin;
    end = pipeline_->range().end;
    if (world_->rank() == 0) spdlog::info("pipeline stages (blocks): {}", parallel::PartitionString(stages_));
  }
  if (par.data > 1 && par.zero1) {
    RETURN_IF_ERROR(parallel::BroadcastModelState(*model_, grid_->data_group(), 0, begin, end, par.bucket_bytes));
    ASSIGN_OR_RETURN(zero_, parallel::ZeroOptimizer::Create(config_.optimizer, TrainedParameters(),
                                                            grid_->data_group(), *backend_));
    return absl::OkStatus();
  }
  if (par.data > 1) {
    parallel::DataParallelOptions options;
    options.bucket_bytes = par.bucket_bytes;
    options.compression = par.compression;
    options.begin_block = begin;
    options.end_block = end;
    ASSIGN_OR_RETURN(dp_, parallel::DataParallel::Create(*model_, grid_->data_group(), options));
    RETURN_IF_ERROR(dp_->BroadcastParameters(0));
  }
  ASSIGN_OR_RETURN(optimizer_, optim::Optimizer::Create(config_.optimizer, TrainedParameters(), DeviceZeros()));
  return absl::OkStatus();
}

ParameterList Trainer::TrainedParameters() {
  return pipeline_ != nullptr ? pipeline_->Parameters() : model_->Parameters();
}

int64_t Trainer::OptimizerStepCount() const { return LocalOptimizer().step_count(); }

optim::Optimizer& Trainer::LocalOptimizer() const { return zero_ != nullptr ? zero_->optimizer() : *optimizer_; }

void Trainer::ZeroGradients() {
  if (zero_ != nullptr) {
    zero_->ZeroGrad();
  } else {
    optimizer_->ZeroGrad();
  }
}

absl::Status Trainer::ReduceGradients(double* comm_seconds) {
  if (zero_ != nullptr) return zero_->ReduceScatterGradients();
  if (dp_ == nullptr) return absl::OkStatus();
  // A pipeline stage ran its backward itself; otherwise the buckets are in flight.
  RETURN_IF_ERROR(pipeline_ != nullptr ? dp_->ReduceGradients() : dp_->FinishGradients());
  *comm_seconds += dp_->last_stats().comm_seconds;
  return absl::OkStatus();
}

absl::Status Trainer::OptimizerStep(float lr, float grad_scale) {
  return zero_ != nullptr ? zero_->Step(lr, grad_scale) : optimizer_->Step(lr, grad_scale);
}

absl::Status Trainer::GatherModel() {
  if (pipeline_ == nullptr) return absl::OkStatus();  // every rank holds the whole model
  for (int s = 0; s < static_cast<int>(stages_.size()); ++s) {
    RETURN_IF_ERROR(parallel::BroadcastModelState(*model_, grid_->pipeline_group(), s, stages_[s].begin,
                                                  stages_[s].end, config_.parallel.bucket_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<optim::NamedTensors> Trainer::GatherOptimizerState(const SnapshotBufferFn* snapshot) {
  const std::vector<std::string> slots = StateSlots(config_.optimizer);
  ParameterList params = TrainedParameters();
  // Collectives move memory of the groups' device (NCCL: CUDA): the host state
  // goes there for them, and comes back.
  auto on_group = [&](const Tensor& host) { return on_device() ? backend_->ToDevice(host) : host; };
  // 1. This stage's state, unsharded: ZeRO-1 shards are all-gathered over the
  //    data-parallel group (layout in zero.h: the flat parameter vector padded
  //    to N * S, rank r holding [r S, (r + 1) S)).
  optim::NamedTensors mine;
  if (zero_ != nullptr) {
    dist::ProcessGroup& group = grid_->data_group();
    const int64_t shard = (zero_->total_elements() + group.size() - 1) / group.size();
    optim::NamedTensors state = zero_->optimizer().StateTensors();
    for (const std::string& slot : slots) {
      Tensor local = Tensor::Zeros({shard});
      int64_t flat = 0;  // the parameter's first element in the flat vector
      for (size_t i = 0; i < params.size(); ++i) {
        const optim::ParamRange& range = zero_->ranges()[i];
        if (range.count > 0) {
          const Tensor* t = Find(state, StateName(slot, params[i]->name));
          if (t == nullptr) return absl::InternalError(absl::StrCat("no optimizer state ", slot, " for ", params[i]->name));
          std::memcpy(local.f32() + (flat + range.offset - zero_->shard_begin()), t->f32(), range.count * sizeof(float));
        }
        flat += params[i]->value.numel();
      }
      Tensor all = on_device() ? backend_->Empty({shard * group.size()}) : Tensor::Zeros({shard * group.size()});
      RETURN_IF_ERROR(group.AllGather(on_group(local), all));
      all = HostCopy(all);
      flat = 0;
      for (Parameter* p : params) {
        Tensor t = Tensor::Empty(p->value.shape());
        std::memcpy(t.f32(), all.f32() + flat, t.bytes());
        mine.emplace_back(StateName(slot, p->name), t);
        flat += p->value.numel();
      }
    }
  } else if (pipeline_ == nullptr && rank() != 0) {
    return mine;  // nothing to gather: rank 0 writes its own
  } else {
    mine = snapshot != nullptr ? optimizer_->CopyStateTensors(*snapshot) : optimizer_->StateTensors();
  }
  if (pipeline_ == nullptr) return mine;
  // 2. Every stage's state on every rank of the replica, stage by stage.
  optim::NamedTensors whole;
  std::set<std::string> seen;
  for (int s = 0; s < static_cast<int>(stages_.size()); ++s) {
    for (Parameter* p : model_->Parameters(stages_[s].begin, stages_[s].end)) {
      for (const std::string& slot : slots) {
        const std::string name = StateName(slot, p->name);
        const Tensor* own = s == pipeline_->stage() ? Find(mine, name) : nullptr;
        Tensor t = own != nullptr ? *own : Tensor::Empty(p->value.shape());
        const Tensor moved = on_group(t);
        RETURN_IF_ERROR(grid_->pipeline_group().Broadcast(moved, s));
        t = HostCopy(moved);
        if (seen.insert(name).second) whole.emplace_back(name, t);
      }
    }
  }
  return whole;
}

absl::Status Trainer::LoadOptimizerState(const optim::NamedTensors& whole, int64_t step_count) {
  const std::vector<std::string> slots = StateSlots(config_.optimizer);
  ParameterList params = TrainedParameters();
  optim::NamedTensors mine;
  for (const std::string& slot : slots) {
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string name = StateName(slot, params[i]->name);
      const Tensor* t = Find(whole, name);
      if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat("no optimizer state \"", name, "\""));
      if (zero_ == nullptr) {
        mine.emplace_back(name, *t);
        continue;
      }
      const optim::ParamRange& range = zero_->ranges()[i];
      if (range.count == 0) continue;
      if (range.count == params[i]->value.numel()) {
        mine.emplace_back(name, *t);  // the whole parameter is in this shard
      } else {
        if (t->numel() != params[i]->value.numel()) {
          return absl::InvalidArgumentError(absl::StrCat("optimizer state \"", name, "\" has ", t->numel(),
                                                         " elements, the parameter ", params[i]->value.numel()));
        }
        Tensor part = Tensor::Empty({range.count});
        std::memcpy(part.f32(), t->f32() + range.offset, range.count * sizeof(float));
        mine.emplace_back(name, part);
      }
    }
  }
  return LocalOptimizer().LoadState(mine, step_count);
}

}  // namespace ringmaster::engine
