#include "engine/parallel/grad_spread.h"

#include <algorithm>

#include "common/status_macros.h"

namespace ringmaster::engine::parallel {

ParameterList PipelineNormParameters(const ParameterList& trained, const ParameterList& tied, int stage) {
  ParameterList params = trained;
  if (stage == 0) return params;
  params.erase(std::remove_if(params.begin(), params.end(),
                              [&](Parameter* p) { return std::find(tied.begin(), tied.end(), p) != tied.end(); }),
               params.end());
  return params;
}

GradSpread SpreadOfGrads(const ParameterList& trained, const ParameterList& tied, int stage,
                         const ZeroOptimizer* zero, dist::ProcessGroup* data_group,
                         dist::ProcessGroup* pipeline_group) {
  GradSpread spread;
  if (zero != nullptr) {
    // The shard covers the tied parameters too, as ZeroOptimizer::GradSumSquares does.
    spread.grads.push_back(zero->shard_grad());
    if (data_group != nullptr) spread.groups.push_back(data_group);
  } else {
    for (Parameter* p : PipelineNormParameters(trained, pipeline_group != nullptr ? tied : ParameterList{}, stage))
      spread.grads.push_back(p->grad);
  }
  if (pipeline_group != nullptr) spread.groups.push_back(pipeline_group);
  return spread;
}

absl::Status SumOverGroups(const std::vector<dist::ProcessGroup*>& groups, const Tensor& tensor) {
  for (dist::ProcessGroup* group : groups) {
    if (group->size() > 1) RETURN_IF_ERROR(group->AllReduce(tensor, dist::ReduceOp::kSum));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::engine::parallel
