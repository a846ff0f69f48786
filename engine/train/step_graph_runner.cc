#include "engine/train/step_graph_runner.h"

#include <utility>

#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

// The batch's tensors, in a fixed order.
std::vector<Tensor*> TensorsOf(Batch& batch) {
  std::vector<Tensor*> out;
  for (Tensor* t : {&batch.images, &batch.tokens, &batch.targets}) {
    if (t->defined()) out.push_back(t);
  }
  return out;
}

}  // namespace

std::unique_ptr<StepGraphRunner> StepGraphRunner::Create(Backend& backend, HostStaging* staging) {
  std::unique_ptr<StepGraphs> graphs = StepGraphs::Create(backend);
  if (graphs == nullptr || staging == nullptr) return nullptr;
  return std::unique_ptr<StepGraphRunner>(new StepGraphRunner(backend, staging, std::move(graphs)));
}

StepGraphRunner::StepGraphRunner(Backend& backend, HostStaging* staging, std::unique_ptr<StepGraphs> graphs)
    : backend_(backend), staging_(staging), graphs_(std::move(graphs)) {}

absl::Status StepGraphRunner::Run(const Batch& batch, float loss_scale, int64_t step, const Body& body) {
  Batch inputs = batch;
  std::vector<Tensor*> slots = TensorsOf(inputs);
  bool same_shapes = inputs_.size() == slots.size();
  for (size_t i = 0; same_shapes && i < slots.size(); ++i) {
    same_shapes = inputs_[i].shape() == slots[i]->shape() && inputs_[i].dtype() == slots[i]->dtype();
  }
  if (graphs_ == nullptr || (!inputs_.empty() && !same_shapes)) return body(batch);
  if (inputs_.empty()) {  // outside the pool: they live as long as the runner
    for (const Tensor* t : slots) inputs_.push_back(backend_.Empty(t->shape(), t->dtype()));
  }
  std::vector<Tensor> host;
  for (const Tensor* t : slots) host.push_back(*t);
  RETURN_IF_ERROR(staging_->CopyTensors(host, inputs_));
  for (size_t i = 0; i < slots.size(); ++i) *slots[i] = inputs_[i];

  auto run_body = [&] { return body(inputs); };
  if (warmups_ < kWarmups) {
    ++warmups_;
    return graphs_->RunInPool(run_body);
  }
  if (graphs_->captured() && captured_scale_ == loss_scale) return graphs_->Launch();
  // Capturing runs the body's host code once but none of its device work:
  // the launch below does that.
  absl::Status status = graphs_->Capture(run_body);
  if (!status.ok()) {
    spdlog::warn("step {}: capturing the training step in a CUDA graph failed; training eagerly from now on: {}",
                 step, status.ToString());
    graphs_.reset();
    return body(inputs);
  }
  captured_scale_ = loss_scale;
  return graphs_->Launch();
}

}  // namespace ringmaster::engine
