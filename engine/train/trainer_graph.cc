// CUDA graphs of the trainer's step (trainer.h, trainer_config.h's
// CudaGraphMode). A graphed step:
//   1. copies the batch into static device inputs (pinned staging) and the
//      step's learning rate into the control block, outside the graph;
//   2. for the first kGraphWarmups steps, runs the step eagerly with its
//      allocations in the graph pool (the capture then needs no cudaMalloc);
//   3. captures DeviceStepBody (forward, backward, the loss scaler's device
//      decision, the optimizer, zeroing the grads) once, and again whenever
//      the loss scale changed (the scale is folded into the loss kernel's
//      launch arguments); the Adam step count, the skip decision and the
//      clipping factor come from the control block, so one graph serves
//      every other step;
//   4. replays the graph.
// The loss read at log intervals, evaluation and checkpoints stay outside the
// graph (StepOnDevice, Evaluate, SaveCheckpoint), as does the step's one
// synchronisation.
#include <cstdint>

#include "common/status_macros.h"
#include "engine/train/trainer.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

// Eager steps in the graph pool before the first capture: the first fills the
// pool with the step's blocks, the second with the blocks allocated while the
// first step's (still held by the layers) are alive, which is what a capture
// allocates.
constexpr int kGraphWarmups = 2;

}  // namespace

optim::DeviceZerosFn Trainer::DeviceZeros() {
  if (!on_device()) return nullptr;
  Backend* backend = backend_.get();
  return [backend](const Shape& shape) { return backend->Zeros(shape); };
}

absl::Status Trainer::InitStepGraphs() {
  staging_ = HostStaging::Create(*backend_);
  int64_t parameters = 0;
  for (const Parameter* p : TrainedParameters()) parameters += p->value.numel();
  ASSIGN_OR_RETURN(const bool use, UseCudaGraphs(config_, distributed() ? world_->size() : 1, parameters));
  if (!use) return absl::OkStatus();
  graphs_ = StepGraphs::Create(*backend_);
  if (graphs_ == nullptr || staging_ == nullptr) {
    return absl::FailedPreconditionError("resources.cuda_graphs: CUDA graphs need the CUDA backend");
  }
  graph_lr_ = true;
  spdlog::info("training step in CUDA graphs ({} parameters; cuda_graphs {})", parameters,
               config_.cuda_graphs == CudaGraphMode::kOn ? "on" : "auto");
  return absl::OkStatus();
}

absl::Status Trainer::GraphedStep(const Batch& batch, StepReport& report) {
  // Every step from now on reads the learning rate from the control block (a
  // graph has it there), even when a failed capture left it eager.
  RETURN_IF_ERROR(staging_->SetDeviceLr(device_scaler_->control(), report.lr));
  std::vector<Tensor> host;
  for (const Tensor* t : {&batch.images, &batch.tokens, &batch.targets}) {
    if (t->defined()) host.push_back(*t);
  }
  bool same_shapes = graph_inputs_.size() == host.size();
  for (size_t i = 0; same_shapes && i < host.size(); ++i) {
    same_shapes = graph_inputs_[i].shape() == host[i].shape() && graph_inputs_[i].dtype() == host[i].dtype();
  }
  if (graphs_ == nullptr || (!graph_inputs_.empty() && !same_shapes)) {
    return DeviceStepBody(batch, report);  // eager: a failed capture, or a batch of another shape
  }
  if (graph_inputs_.empty()) {  // outside the pool: they live as long as the trainer
    for (const Tensor& t : host) graph_inputs_.push_back(backend_->Empty(t.shape(), t.dtype()));
  }
  RETURN_IF_ERROR(staging_->CopyTensors(host, graph_inputs_));
  Batch inputs = batch;
  size_t next = 0;
  for (Tensor* t : {&inputs.images, &inputs.tokens, &inputs.targets}) {
    if (t->defined()) *t = graph_inputs_[next++];
  }
  auto body = [&] { return DeviceStepBody(inputs, report); };
  if (graph_warmups_ < kGraphWarmups) {
    ++graph_warmups_;
    return graphs_->RunInPool(body);
  }
  if (graphs_->captured() && graph_loss_scale_ == scaler_.scale()) {
    ++losses_since_read_;  // what the captured body counted once
    return graphs_->Launch();
  }
  // Capturing runs the body's host code once (counting the loss it enqueues)
  // but none of its device work: the launch below does that.
  const int64_t losses_before = losses_since_read_;
  absl::Status captured = graphs_->Capture(body);
  if (!captured.ok()) {
    spdlog::warn("step {}: capturing the training step in a CUDA graph failed; training eagerly from now on: {}",
                 step_ + 1, captured.ToString());
    graphs_.reset();
    losses_since_read_ = losses_before;
    return DeviceStepBody(inputs, report);
  }
  graph_loss_scale_ = scaler_.scale();
  return graphs_->Launch();
}

}  // namespace ringmaster::engine
