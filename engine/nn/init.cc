#include "engine/nn/init.h"

#include <cmath>

#include "engine/core/random.h"

namespace ringmaster::engine::nn {

void InitUniformFanIn(Backend& backend, Parameter& p, int64_t fan_in, uint64_t seed) {
  Rng rng(seed ^ HashName(p.name));
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  Tensor host = Tensor::Empty(p.value.shape());
  for (int64_t i = 0; i < host.numel(); ++i) host.f32()[i] = static_cast<float>(rng.Uniform(-bound, bound));
  backend.CopyFromHost(host, p.value);
}

void InitNormal(Backend& backend, Parameter& p, double std, uint64_t seed) {
  Rng rng(seed ^ HashName(p.name));
  Tensor host = Tensor::Empty(p.value.shape());
  for (int64_t i = 0; i < host.numel(); ++i) host.f32()[i] = static_cast<float>(std * rng.Normal());
  backend.CopyFromHost(host, p.value);
}

void InitConstant(Backend& backend, const Tensor& t, float value) { backend.Fill(t, value); }

}  // namespace ringmaster::engine::nn
