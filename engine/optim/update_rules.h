#ifndef RINGMASTER_ENGINE_OPTIM_UPDATE_RULES_H_
#define RINGMASTER_ENGINE_OPTIM_UPDATE_RULES_H_

// Internal to engine/optim: the concrete optimizers behind Optimizer::Create.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/optim/optimizer.h"

namespace ringmaster::engine::optim {

// Builds the optimizer for config.kind over already-checked config, params
// and ranges (one per parameter). reduce_norms null = not sharded.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateUpdateRule(const OptimizerConfig& config, const ParameterList& params,
                                                            std::vector<ParamRange> ranges,
                                                            PartialSumReducer reduce_norms);

// The same for CUDA parameters: the fused kernels of engine/kernels/optim_update.h
// (cuda_update_rules.cc), state from device_zeros (null: cudaMalloc), or
// FAILED_PRECONDITION in a build without CUDA and for sharded LARS/LAMB.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateCudaUpdateRule(const OptimizerConfig& config,
                                                                const ParameterList& params,
                                                                std::vector<ParamRange> ranges,
                                                                PartialSumReducer reduce_norms,
                                                                DeviceZerosFn device_zeros);

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_UPDATE_RULES_H_
