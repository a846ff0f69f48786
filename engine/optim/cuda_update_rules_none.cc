// A build without CUDA: CUDA parameters cannot be optimized here.
#include "engine/optim/update_rules.h"

namespace ringmaster::engine::optim {

absl::StatusOr<std::unique_ptr<Optimizer>> CreateCudaUpdateRule(const OptimizerConfig& /*config*/,
                                                                const ParameterList& /*params*/,
                                                                std::vector<ParamRange> /*ranges*/,
                                                                PartialSumReducer /*reduce_norms*/,
                                                                DeviceZerosFn /*device_zeros*/) {
  return absl::FailedPreconditionError(
      "the optimizer's parameters are CUDA tensors, but this binary was built without CUDA");
}

}  // namespace ringmaster::engine::optim
