// Trainer on a CUDA device: the step with the loss scaler's decision, the
// gradient norm and clipping kept on the device, one Backend::Synchronize per
// step, the loss read back only at log intervals; host copies for evaluation
// and checkpoints. Data x pipeline layouts other than plain data parallelism
// are CPU-only for now (InitDevice says so).
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/train/backend_factory.h"
#include "engine/train/trainer.h"

namespace ringmaster::engine {

absl::Status Trainer::InitDevice() {
  if (pipeline_ != nullptr || zero_ != nullptr) {  // both move host memory between ranks
    return absl::FailedPreconditionError(
        "parallelism.pipeline > 1 and parallelism.zero1 are not supported on CUDA yet; use plain data "
        "parallelism or resources.device: cpu");
  }
  ASSIGN_OR_RETURN(device_scaler_,
                   optim::DeviceLossScaler::Create(config_.loss_scaler, TrainedParameters(), BackendStream(*backend_)));
  optimizer_->SetDeviceStep({BackendStream(*backend_), device_scaler_->control()});
  device_loss_ = backend_->Zeros({1});
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

  RETURN_IF_ERROR(ForwardBackward(batch, scaler_.scale(), &report.comm_seconds).status());
  RETURN_IF_ERROR(ReduceGradients(&report.comm_seconds));
  ++losses_since_read_;
  if (scaler_.enabled()) {
    std::vector<Tensor> grads;
    for (Parameter* p : TrainedParameters()) grads.push_back(p->grad);
    backend_->NonFiniteCheck(grads, device_scaler_->flag());
  }
  RETURN_IF_ERROR(device_scaler_->Prologue(config_.grad_clip_norm));
  RETURN_IF_ERROR(optimizer_->Step(report.lr, 1.0f));  // a no-op on the device when the step is skipped
  RETURN_IF_ERROR(device_scaler_->Epilogue());
  optimizer_->ZeroGrad();
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
  optimizer_->SetStepCount(snap.optimizer_steps);
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

Batch Trainer::ToBackend(const Batch& batch) {
  if (!on_device()) return batch;
  Batch out = batch;
  for (Tensor* t : {&out.images, &out.tokens, &out.targets}) {
    if (t->defined() && t->device() == Device::kCpu) *t = backend_->ToDevice(*t);
  }
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
