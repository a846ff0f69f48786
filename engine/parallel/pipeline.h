#ifndef RINGMASTER_ENGINE_PARALLEL_PIPELINE_H_
#define RINGMASTER_ENGINE_PARALLEL_PIPELINE_H_

// PipelineStage: runs this rank's stage of a pipeline-parallel training step.
// One replica's P stages form the pipeline group (rank = stage); each stage
// drives its own range of the model's blocks through the schedule's actions
// (schedule.h) for m micro-batches of the local batch:
//
//  * The first stage takes the micro-batch's input (images f32 or tokens i32)
//    from the batch; the others receive it from the previous stage with a
//    shape header (pipeline_p2p.h). The last stage computes the loss
//    (SoftmaxCrossEntropy per micro-batch) and starts the backward from
//    dlogits scaled by loss_scale / m, so the accumulated gradients are those
//    of the mean of the micro-batch losses; activation gradients go back.
//  * Gradients ACCUMULATE (+=) into the parameters over the micro-batches; the
//    caller zeroes them before the step (optimizer ZeroGrad) and steps the
//    optimizer over Parameters() after it (after the data-parallel reduction).
//  * Tied parameters (the GPT's transformer.wte.weight, used by the embedding
//    and the LM head): a parameter used by blocks of several stages is held by
//    each of them; Create builds a sub-group of those stages (NewGroup over the
//    pipeline group) and broadcasts its value from the first holder, and every
//    Step all-reduces (sums) its gradient over them, so every holder applies
//    the same update and the copies stay identical (Megatron's approach).
//  * Step returns the mean loss over the micro-batches, broadcast from the
//    last stage, on every stage.
//
// Equivalence: the mean of the micro-batch means equals the batch mean when
// every micro-batch has the same number of counted targets (no ignore_index
// rows), which our datasets guarantee. BatchNorm normalises each micro-batch
// on its own and updates its running statistics once per micro-batch (as
// PyTorch's GPipe without deferred BN); set ModelConfig.bn_ghost_batch to the
// micro-batch size to reproduce that layout in a single process. Dropout:
// micro-batch i of the step with rng_key k uses key k * m + i, so m = 1 is the
// unpipelined run and micro-batches never share masks.
//
// Requirements: every rank builds the same model (same config and seed) and
// the same PipelineConfig; every stage calls Create, then Step, together.
// The first and the last stage must get the same batch (the middle stages'
// batch is unused). After an error the step is lost and the group broken
// (process_group.h). Not thread-safe: one thread drives a stage (and its
// model, backend and groups).

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "engine/data/batch.h"
#include "engine/dist/process_group.h"
#include "engine/nn/loss.h"
#include "engine/nn/model.h"
#include "engine/parallel/schedule.h"
#include "engine/parallel/stage_partition.h"

namespace ringmaster::engine::parallel {

struct PipelineConfig {
  // Every stage's blocks: group.size() contiguous non-empty ranges covering the model.
  StagePartition stages;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int micro_batches = 1;  // m >= 1; must divide the local batch
  // Times PipelineStepResult's seconds; not owned; Clock::Real() when null.
  Clock* clock = nullptr;
};

struct PipelineStepOptions {
  float loss_scale = 1.0f;  // fp16 loss scale: multiplies the gradients, not the loss
  uint64_t rng_key = 0;     // dropout key of the step (the trainer uses the step number)
};

struct PipelineStepResult {
  float loss = 0.0f;             // mean of the micro-batch losses; the same on every stage
  double step_seconds = 0.0;     // host time of the whole Step
  double compute_seconds = 0.0;  // host time in Forward/Backward actions (the last stage's loss included)
  double comm_seconds = 0.0;     // host time in send/recv actions (waiting for neighbours included)
  int peak_in_flight = 0;        // most micro-batches whose forward ran and backward did not
};

class PipelineStage {
 public:
  // `model`: the whole model (this stage runs config.stages[group.rank()]);
  // `group`: the pipeline group of this replica. Both must outlive the stage.
  // Collective over `group` (tied-parameter sub-groups). INVALID_ARGUMENT for a
  // partition that does not match the model or the group, m < 1.
  static absl::StatusOr<std::unique_ptr<PipelineStage>> Create(nn::Model& model, dist::ProcessGroup& group,
                                                               PipelineConfig config);
  ~PipelineStage();

  // One forward/backward of `batch` (split into m micro-batches) through the
  // pipeline. INVALID_ARGUMENT when m does not divide the batch or the first
  // (last) stage's batch has no inputs (targets).
  absl::StatusOr<PipelineStepResult> Step(const Batch& batch, const PipelineStepOptions& options = {});

  int stage() const { return stage_; }
  int num_stages() const { return static_cast<int>(config_.stages.size()); }
  const StageRange& range() const { return config_.stages[stage_]; }
  const std::vector<Action>& schedule() const { return actions_; }
  // This stage's parameters (tied ones included), for the optimizer and the
  // data-parallel reduction.
  ParameterList Parameters() { return model_.Parameters(range().begin, range().end); }
  BufferList Buffers() { return model_.Buffers(range().begin, range().end); }
  // The parameters this stage shares with other stages (summed by Step).
  ParameterList TiedParameters() const;

 private:
  struct TiedGroup {
    std::unique_ptr<dist::ProcessGroup> group;
    ParameterList params;
  };
  struct StepState;

  PipelineStage(nn::Model& model, dist::ProcessGroup& group, PipelineConfig config, std::vector<Action> actions);
  // Finds parameters held by several stages, builds their sub-groups, and
  // makes their values identical (broadcast from the first holder).
  absl::Status SetUpTiedParameters();
  absl::Status RunAction(const Action& action, StepState& state);
  absl::Status Forward(int micro_batch, StepState& state);
  absl::Status Backward(int micro_batch, StepState& state);
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == num_stages() - 1; }

  nn::Model& model_;
  dist::ProcessGroup& group_;
  const PipelineConfig config_;
  const int stage_;
  const std::vector<Action> actions_;
  Clock* clock_;
  nn::SoftmaxCrossEntropy loss_;
  std::vector<TiedGroup> tied_;
};

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_PIPELINE_H_
