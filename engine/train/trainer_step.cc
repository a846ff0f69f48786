// The trainer's one step loop, the same on every device: forward and backward,
// the gradient reduction, then the StepScaler's sequence (step_scaler.h) —
// inf/NaN check, global norm, clipping, skip and loss scale — and the update.
// On the host the scaler decides at once; on a CUDA device (DeviceLossScaler)
// it decides on the device, the step has one Backend::Synchronize and the loss
// is read back only at log intervals. With ZeRO-1 or a pipeline the gradients
// are spread over ranks (grad_spread.h): the partial sums of squares and the
// overflow flags are combined over the groups before the decision. A CUDA
// step may run its body in a captured graph (StepGraphRunner).
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/parallel/grad_spread.h"
#include "engine/train/backend_factory.h"
#include "engine/train/state_dump.h"
#include "engine/train/trainer.h"

namespace ringmaster::engine {

parallel::GradSpread Trainer::Spread() {
  if (grid_ == nullptr) return parallel::SpreadOfGrads(TrainedParameters(), {}, 0, nullptr, nullptr, nullptr);
  return parallel::SpreadOfGrads(TrainedParameters(),
                                 pipeline_ != nullptr ? pipeline_->TiedParameters() : ParameterList{},
                                 pipeline_ != nullptr ? pipeline_->stage() : 0, zero_.get(),
                                 grid_->layout().data() > 1 ? &grid_->data_group() : nullptr,
                                 pipeline_ != nullptr ? &grid_->pipeline_group() : nullptr);
}

absl::Status Trainer::InitStepScaler() {
  const parallel::GradSpread spread = Spread();
  if (on_device()) {
    ASSIGN_OR_RETURN(std::unique_ptr<optim::DeviceLossScaler> scaler,
                     optim::DeviceLossScaler::Create(config_.loss_scaler, spread.grads, BackendStream(*backend_)));
    device_control_ = scaler->control();
    LocalOptimizer().SetDeviceStep({BackendStream(*backend_), device_control_});
    step_scaler_ = std::move(scaler);
  } else {
    ASSIGN_OR_RETURN(step_scaler_, optim::HostStepScaler::Create(config_.loss_scaler, spread.grads));
  }
  step_loss_ = backend_->Zeros({1});
  return absl::OkStatus();
}

bool Trainer::LossReadDue() const {
  if (!on_device()) return true;  // free on the host: every step reports its own loss
  return config_.log_interval_steps <= 1 || step_ % config_.log_interval_steps == 0 || step_ == total_steps_ ||
         EvalDue();
}

absl::Status Trainer::ForwardBackward(const Batch& batch, float loss_scale, double* comm_seconds) {
  if (pipeline_ != nullptr) {
    parallel::PipelineStepOptions options;
    options.loss_scale = loss_scale;
    options.rng_key = static_cast<uint64_t>(step_);
    ASSIGN_OR_RETURN(parallel::PipelineStepResult result, pipeline_->Step(batch, options));
    *comm_seconds += result.comm_seconds;
    // The stage's Step read its loss back already.
    backend_->Axpy(1.0f, backend_->ToDevice(Tensor::FromVector({1}, {result.loss})), step_loss_);
    return absl::OkStatus();
  }
  // Micro-batches one after the other (gradient accumulation); micro-batch i
  // of step k draws dropout key k * m + i, as a pipeline stage does.
  const int m = config_.parallel.micro_batches;
  for (int i = 0; i < m; ++i) {
    ASSIGN_OR_RETURN(Batch micro, ToBackend(m > 1 ? MicroBatch(batch, m, i) : batch));
    const Tensor& input = IsLanguageModel() ? micro.tokens : micro.images;
    model_->SetRngKey(static_cast<uint64_t>(step_) * m + i);
    ASSIGN_OR_RETURN(Tensor loss, loss_->ForwardModel(*model_, input, micro.targets, /*training=*/true, loss_scale / m));
    ASSIGN_OR_RETURN(Tensor dlogits, loss_->Backward());  // undefined after the GPT's fused classifier
    if (dp_ != nullptr) {
      RETURN_IF_ERROR(dp_->Backward(dlogits, /*sync=*/i == m - 1).status());
    } else {
      RETURN_IF_ERROR(model_->Backward(dlogits).status());
    }
    backend_->Axpy(1.0f / m, loss, step_loss_);  // read back when LossReadDue
  }
  return absl::OkStatus();
}

absl::Status Trainer::StepBody(const Batch& batch, StepReport& report) {
  SetTrainingPhase("forward/backward");
  RETURN_IF_ERROR(ForwardBackward(batch, step_scaler_->scale(), &report.comm_seconds));
  SetTrainingPhase("gradient reduction");
  RETURN_IF_ERROR(ReduceGradients(&report.comm_seconds));
  SetTrainingPhase("optimizer step");
  const parallel::GradSpread spread = Spread();
  if (config_.loss_scaler.enabled) backend_->NonFiniteCheck(spread.grads, step_scaler_->flag());
  RETURN_IF_ERROR(step_scaler_->LocalSumSquares());
  // These collectives wait for the slowest rank too: communication, not the
  // rank's own work (the coordinator's straggler detection tells them apart).
  const auto collectives = std::chrono::steady_clock::now();
  for (dist::ProcessGroup* group : spread.groups) {
    RETURN_IF_ERROR(step_scaler_->SumSquaresOverRanks(
        group->size(), [group](const Tensor& in, const Tensor& out) { return group->AllGather(in, out); }));
  }
  if (config_.loss_scaler.enabled) RETURN_IF_ERROR(parallel::SumOverGroups(spread.groups, step_scaler_->flag()));
  report.comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - collectives).count();
  RETURN_IF_ERROR(step_scaler_->Decide(config_.grad_clip_norm));
  // On the device the update always runs and does nothing when the step is
  // skipped (ZeRO-1 still gathers the unchanged values).
  const optim::OptimizerUpdate update = step_scaler_->Update();
  if (update.apply) RETURN_IF_ERROR(OptimizerStep(report.lr, update.grad_scale));
  RefreshWeightOperands(TrainedParameters());  // once per step, the next forward's weights
  RETURN_IF_ERROR(step_scaler_->Epilogue());
  ZeroGradients();
  return absl::OkStatus();
}

absl::StatusOr<StepReport> Trainer::Step() {
  auto start = std::chrono::steady_clock::now();
  Batch batch = train_loader_->Next();
  StepReport report;
  report.data_wait_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.model_flops = rank_flops_per_step_;
  report.peak_flops = peak_flops_;
  report.epoch = batch.epoch;
  report.samples = config_.data.global_batch;
  report.loss_scale = scaler_.scale();  // the scaler's state after the last step
  if (IsLanguageModel()) report.tokens = config_.data.global_batch * config_.model.block_size;
  report.lr = schedule_->LearningRate(OptimizerStepCount());

  SetTrainingStep(step_ + 1);
  ScopedTrainingPhase phase("forward/backward");
  if (step_graphs_ != nullptr) {
    // Every step reads the learning rate from the control block (a graph has
    // it there), also after a failed capture left the steps eager.
    RETURN_IF_ERROR(staging_->SetDeviceLr(device_control_, report.lr));
    RETURN_IF_ERROR(step_graphs_->Run(batch, scaler_.scale(), step_ + 1,
                                      [&](const Batch& inputs) { return StepBody(inputs, report); }));
  } else {
    RETURN_IF_ERROR(StepBody(batch, report));
  }
  ++losses_since_read_;
  ++step_;

  const bool read_loss = LossReadDue();
  if (read_loss && grid_ != nullptr && grid_->layout().data() > 1) {
    const auto reduce = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(grid_->data_group().AllReduce(step_loss_, dist::ReduceOp::kAvg));
    report.comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - reduce).count();
  }
  RETURN_IF_ERROR(backend_->Synchronize());  // CUDA: the step's one synchronisation; op errors surface here
  if (read_loss) {
    last_loss_ = HostCopy(step_loss_).f32()[0] / static_cast<float>(losses_since_read_);
    backend_->Fill(step_loss_, 0.0f);
    losses_since_read_ = 0;
  }
  const optim::StepSnapshot snap = step_scaler_->Snapshot();
  LocalOptimizer().SetStepCount(snap.optimizer_steps);
  RETURN_IF_ERROR(scaler_.LoadState(snap.scaler));
  report.loss = last_loss_;
  report.skipped = snap.skipped;
  report.skipped_total = snap.scaler.skipped_steps;
  report.grad_norm = snap.grad_norm;
  if (on_device()) {
    const DeviceMemoryStats memory = BackendMemory(*backend_);
    report.device_memory_bytes = memory.allocated_bytes;
    report.device_memory_peak_bytes = memory.peak_allocated_bytes;
  }
  report.step = step_;
  report.total_steps = total_steps_;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (read_loss && !std::isfinite(report.loss) && !scaler_.enabled()) {
    return absl::InternalError(absl::StrCat("step ", step_, ": the training loss is ", report.loss,
                                            " (diverged; lower the learning rate or enable fp16 loss scaling)"));
  }
  return report;
}

}  // namespace ringmaster::engine
