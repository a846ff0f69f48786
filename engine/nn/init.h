#ifndef RINGMASTER_ENGINE_NN_INIT_H_
#define RINGMASTER_ENGINE_NN_INIT_H_

// Deterministic parameter initialisation. Each tensor draws from its own
// stream, Rng(seed ^ HashName(name)), so a value depends only on the model
// seed and the parameter's name: a pipeline stage that builds only its own
// blocks gets the same values as the whole model.

#include <cstdint>

#include "engine/core/backend.h"
#include "engine/core/parameter.h"

namespace ringmaster::engine::nn {

// U(-bound, bound) with bound = 1 / sqrt(fan_in): PyTorch's default for
// nn.Linear and nn.Conv2d weights (kaiming_uniform_ with a = sqrt(5)) and biases.
void InitUniformFanIn(Backend& backend, Parameter& p, int64_t fan_in, uint64_t seed);
// N(0, std^2) (GPT-2: std 0.02).
void InitNormal(Backend& backend, Parameter& p, double std, uint64_t seed);
void InitConstant(Backend& backend, const Tensor& t, float value);

}  // namespace ringmaster::engine::nn

#endif  // RINGMASTER_ENGINE_NN_INIT_H_
