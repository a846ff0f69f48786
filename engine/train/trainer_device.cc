// Trainer on a CUDA device: the step with the loss scaler's decision, the
// gradient norm and clipping kept on the device, one Backend::Synchronize per
// step, the loss read back only at log intervals; host copies for evaluation
// and checkpoints. With ZeRO-1 or a pipeline the gradients are spread over
// ranks (grad_spread.h): the partial sums of squares and the overflow flags are
// combined with the groups' collectives on the device before the decision.
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/parallel/grad_spread.h"
#include "engine/train/backend_factory.h"
#include "engine/train/trainer.h"

namespace ringmaster::engine {
namespace {

// This rank's part of the step's gradients and the groups holding the rest.
parallel::GradSpread SpreadOf(const ParameterList& trained, const parallel::PipelineStage* pipeline,
                              const parallel::ZeroOptimizer* zero, parallel::Grid* grid) {
  if (grid == nullptr) return parallel::SpreadOfGrads(trained, {}, 0, nullptr, nullptr, nullptr);
  return parallel::SpreadOfGrads(trained, pipeline != nullptr ? pipeline->TiedParameters() : ParameterList{},
                                 pipeline != nullptr ? pipeline->stage() : 0, zero,
                                 grid->layout().data() > 1 ? &grid->data_group() : nullptr,
                                 pipeline != nullptr ? &grid->pipeline_group() : nullptr);
}

}  // namespace

absl::Status Trainer::InitDevice() {
  const parallel::GradSpread spread = SpreadOf(TrainedParameters(), pipeline_.get(), zero_.get(), grid_.get());
  ASSIGN_OR_RETURN(device_scaler_,
                   optim::DeviceLossScaler::Create(config_.loss_scaler, spread.grads, BackendStream(*backend_)));
  LocalOptimizer().SetDeviceStep({BackendStream(*backend_), device_scaler_->control()});
  device_loss_ = backend_->Zeros({1});
  RETURN_IF_ERROR(InitStepGraphs());
  return backend_->Synchronize();
}

bool Trainer::LossReadDue() const {
  return config_.log_interval_steps <= 1 || step_ % config_.log_interval_steps == 0 || step_ == total_steps_ ||
         EvalDue();
}

absl::StatusOr<StepReport> Trainer::StepOnDevice() {
  auto start = std::chrono::steady_clock::now();
  Batch batch = train_loader_->Next();
  StepReport report;
  report.epoch = batch.epoch;
  report.samples = config_.data.global_batch;
  report.loss_scale = scaler_.scale();  // what the device holds: read back after the last step
  if (IsLanguageModel()) report.tokens = config_.data.global_batch * config_.model.block_size;
  report.lr = schedule_->LearningRate(OptimizerStepCount());
  RETURN_IF_ERROR(graph_lr_ ? GraphedStep(batch, report) : DeviceStepBody(batch, report));
  ++step_;

  const bool read_loss = LossReadDue();
  if (read_loss && grid_ != nullptr && grid_->layout().data() > 1) {
    RETURN_IF_ERROR(grid_->data_group().AllReduce(device_loss_, dist::ReduceOp::kAvg));
  }
  RETURN_IF_ERROR(backend_->Synchronize());  // the step's one synchronisation; op errors surface here
  if (read_loss) {
    last_loss_ = HostCopy(device_loss_).f32()[0] / static_cast<float>(losses_since_read_);
    backend_->Fill(device_loss_, 0.0f);
    losses_since_read_ = 0;
  }
  const optim::DeviceStepSnapshot snap = device_scaler_->Snapshot();
  LocalOptimizer().SetStepCount(snap.optimizer_steps);
  RETURN_IF_ERROR(scaler_.LoadState(snap.scaler));
  report.loss = last_loss_;
  report.skipped = snap.skipped;
  report.skipped_total = snap.scaler.skipped_steps;
  report.grad_norm = snap.grad_norm;
  const DeviceMemoryStats memory = BackendMemory(*backend_);
  report.device_memory_bytes = memory.allocated_bytes;
  report.device_memory_peak_bytes = memory.peak_allocated_bytes;
  report.step = step_;
  report.total_steps = total_steps_;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (read_loss && !std::isfinite(report.loss) && !scaler_.enabled()) {
    return absl::InternalError(absl::StrCat("step ", step_, ": the training loss is ", report.loss,
                                            " (diverged; lower the learning rate or enable fp16 loss scaling)"));
  }
  return report;
}

absl::Status Trainer::DeviceStepBody(const Batch& batch, StepReport& report) {
  ASSIGN_OR_RETURN(const float pipeline_loss, ForwardBackward(batch, scaler_.scale(), &report.comm_seconds));
  if (pipeline_ != nullptr) {  // the stage's Step read its loss back already
    backend_->Axpy(1.0f, backend_->ToDevice(Tensor::FromVector({1}, {pipeline_loss})), device_loss_);
  }
  RETURN_IF_ERROR(ReduceGradients(&report.comm_seconds));
  ++losses_since_read_;
  const parallel::GradSpread spread = SpreadOf(TrainedParameters(), pipeline_.get(), zero_.get(), grid_.get());
  if (scaler_.enabled()) backend_->NonFiniteCheck(spread.grads, device_scaler_->flag());
  RETURN_IF_ERROR(device_scaler_->LocalSumSquares());
  for (dist::ProcessGroup* group : spread.groups) {
    RETURN_IF_ERROR(device_scaler_->SumSquaresOverRanks(
        group->size(), [group](const Tensor& in, const Tensor& out) { return group->AllGather(in, out); }));
  }
  if (scaler_.enabled()) RETURN_IF_ERROR(parallel::SumOverGroups(spread.groups, device_scaler_->flag()));
  RETURN_IF_ERROR(device_scaler_->Decide(config_.grad_clip_norm));
  // A no-op on the device when the step is skipped (ZeRO-1 still gathers the unchanged values).
  RETURN_IF_ERROR(OptimizerStep(report.lr, 1.0f));
  RETURN_IF_ERROR(device_scaler_->Epilogue());
  ZeroGradients();
  return absl::OkStatus();
}

absl::StatusOr<Batch> Trainer::ToBackend(const Batch& batch) {
  if (!on_device()) return batch;
  Batch out = batch;
  std::vector<Tensor> host, device;
  for (Tensor* t : {&out.images, &out.tokens, &out.targets}) {
    if (!t->defined() || t->device() != Device::kCpu) continue;
    host.push_back(*t);
    *t = backend_->Empty(t->shape(), t->dtype());
    device.push_back(*t);
  }
  if (staging_ == nullptr) {
    for (size_t i = 0; i < host.size(); ++i) backend_->CopyFromHost(host[i], device[i]);
    return out;
  }
  RETURN_IF_ERROR(staging_->CopyTensors(host, device));
  return out;
}

Tensor Trainer::HostCopy(const Tensor& t) {
  if (t.device() == Device::kCpu) return t;
  return backend_->ToHost(t);
}

void Trainer::CopyIntoLive(const Tensor& host, const Tensor& live) {
  if (live.device() == Device::kCpu) {
    std::memcpy(live.raw(), host.raw(), live.bytes());
  } else {
    backend_->CopyFromHost(host, live);
  }
}

}  // namespace ringmaster::engine
