#ifndef RINGMASTER_ENGINE_TRAIN_STEP_GRAPH_RUNNER_H_
#define RINGMASTER_ENGINE_TRAIN_STEP_GRAPH_RUNNER_H_

// StepGraphRunner: runs the trainer's step body through a CUDA graph
// (device_step.h's StepGraphs). Per step:
//   1. the batch is copied into static device inputs (pinned staging), which
//      the body reads in place of the batch;
//   2. for the first kWarmups steps the body runs eagerly with its
//      allocations in the graph pool (the capture then needs no cudaMalloc);
//   3. the body is captured once, and again whenever the loss scale changed
//      (the scale is folded into the loss kernel's launch arguments); the
//      Adam step count, the skip decision, the clipping factor and the
//      learning rate come from the step control block, so one graph serves
//      every other step;
//   4. the graph is replayed.
// A failed capture is logged and the runner runs every later step eagerly; a
// batch of another shape (the last, partial one) runs eagerly too. The body
// must enqueue exactly the same work each call; whatever it must do on the
// host every step belongs outside it.
//
// Not thread-safe: the training thread owns it.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/core/backend.h"
#include "engine/data/batch.h"
#include "engine/train/device_step.h"

namespace ringmaster::engine {

class StepGraphRunner {
 public:
  // Eager steps in the graph pool before the first capture: the first fills
  // the pool with the step's blocks, the second with the blocks allocated
  // while the first step's (still held by the layers) are alive, which is
  // what a capture allocates.
  static constexpr int kWarmups = 2;

  // `staging` (not owned) copies the batches. Null when the backend is not CUDA.
  static std::unique_ptr<StepGraphRunner> Create(Backend& backend, HostStaging* staging);

  using Body = std::function<absl::Status(const Batch& batch)>;
  // One step of `body` on `batch` (host tensors), as described above;
  // `loss_scale` is the scale the body folds in, `step` the step's number
  // (for the log). An error of the body or of a replay is returned.
  absl::Status Run(const Batch& batch, float loss_scale, int64_t step, const Body& body);
  // Whether the steps now replay a captured graph.
  bool captured() const { return graphs_ != nullptr && graphs_->captured(); }

 private:
  StepGraphRunner(Backend& backend, HostStaging* staging, std::unique_ptr<StepGraphs> graphs);

  Backend& backend_;
  HostStaging* const staging_;
  std::unique_ptr<StepGraphs> graphs_;  // null after a failed capture
  std::vector<Tensor> inputs_;          // the static device inputs
  float captured_scale_ = 0.0f;
  int warmups_ = 0;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_STEP_GRAPH_RUNNER_H_
