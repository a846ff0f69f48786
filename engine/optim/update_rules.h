#ifndef RINGMASTER_ENGINE_OPTIM_UPDATE_RULES_H_
#define RINGMASTER_ENGINE_OPTIM_UPDATE_RULES_H_

// Internal to engine/optim: the concrete optimizers behind Optimizer::Create.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/optim/optimizer.h"

namespace ringmaster::engine::optim {

// Builds the optimizer for config.kind over already-checked config, params
// and ranges (one per parameter). reduce_norms null = not sharded.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateUpdateRule(const OptimizerConfig& config, const ParameterList& params,
                                                            std::vector<ParamRange> ranges,
                                                            PartialSumReducer reduce_norms);

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_UPDATE_RULES_H_
