#ifndef RINGMASTER_ENGINE_PARALLEL_GRAD_SPREAD_H_
#define RINGMASTER_ENGINE_PARALLEL_GRAD_SPREAD_H_

// GradSpread: which part of a step's gradients this rank holds, and over which
// groups the partial results (sum of grad^2, the overflow flag) are added, so
// that every rank takes the same decision on the same global norm. The CUDA
// trainer step combines them on the device (device_loss_scaler.h); the CPU
// step computes the same on the host (trainer_dist.cc).
//
//  * Plain data parallelism: every rank holds the whole reduced gradient.
//  * ZeRO-1: a rank holds only its shard of the averaged gradient
//    (ZeroOptimizer::shard_grad); partial sums are added over the
//    data-parallel group.
//  * Pipeline: a stage holds its blocks' gradients; partial sums are added
//    over the pipeline group. A tied parameter (summed over its holders by
//    PipelineStage::Step) counts once: stage 0 counts it, later stages leave
//    it out (PipelineNormParameters).
//  * Both: the data-parallel group first, then the pipeline group.
//
// Functions over tensors of any device; SumOverGroups runs collectives (each
// group's contract applies). Thread-safe as the groups they use.

#include <vector>

#include "absl/status/status.h"
#include "engine/core/parameter.h"
#include "engine/core/tensor.h"
#include "engine/dist/process_group.h"
#include "engine/parallel/zero.h"

namespace ringmaster::engine::parallel {

struct GradSpread {
  // The grads whose squares this rank adds, and that its overflow check reads.
  std::vector<Tensor> grads;
  // Partial sums are added over these groups, in order (empty: nothing to add).
  std::vector<dist::ProcessGroup*> groups;
};

// `trained`: the parameters this rank's optimizer steps (a stage's, tied ones
// included). `tied`: those of them shared with other stages. `stage`: this
// rank's pipeline stage (0 without a pipeline).
ParameterList PipelineNormParameters(const ParameterList& trained, const ParameterList& tied, int stage);

// `zero` null without ZeRO-1, `data_group` null without data parallelism,
// `pipeline_group` null without a pipeline.
GradSpread SpreadOfGrads(const ParameterList& trained, const ParameterList& tied, int stage,
                         const ZeroOptimizer* zero, dist::ProcessGroup* data_group,
                         dist::ProcessGroup* pipeline_group);

// tensor <- its sum over every rank of each group in turn (in place; f32).
absl::Status SumOverGroups(const std::vector<dist::ProcessGroup*>& groups, const Tensor& tensor);

}  // namespace ringmaster::engine::parallel

#endif  // RINGMASTER_ENGINE_PARALLEL_GRAD_SPREAD_H_
