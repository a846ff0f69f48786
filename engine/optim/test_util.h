#ifndef RINGMASTER_ENGINE_OPTIM_TEST_UTIL_H_
#define RINGMASTER_ENGINE_OPTIM_TEST_UTIL_H_

// Test helpers: owned random parameters, and reference optimizers written
// straight from the papers / PyTorch documentation in fp64, sharing no code
// with the library.

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/core/parameter.h"
#include "engine/core/tensor.h"
#include "engine/optim/optimizer.h"

namespace ringmaster::engine::optim::testing {

struct ParamSpec {
  std::string name;
  Shape shape;
  bool decay = true;
};

// Parameters that own their tensors; list() is the ParameterList view.
class TestParams {
 public:
  // Values uniform in [-1, 1) from `seed`, grads zero.
  TestParams(const std::vector<ParamSpec>& specs, uint32_t seed);
  TestParams(const TestParams&) = delete;
  TestParams& operator=(const TestParams&) = delete;

  // A deep copy (new storage).
  std::unique_ptr<TestParams> Clone() const;

  ParameterList list() const;
  Parameter& operator[](size_t i) const { return *params_[i]; }
  size_t size() const { return params_.size(); }
  // Values as fp64 vectors, one per parameter.
  std::vector<std::vector<double>> Values() const;
  // Sets every grad to scale * grads[i] (grads as fp32 values).
  void SetGrads(const std::vector<std::vector<float>>& grads, float scale) const;

 private:
  TestParams() = default;
  std::vector<std::unique_ptr<Parameter>> params_;
};

// Random gradients shaped like `params`, uniform in [-amplitude, amplitude).
std::vector<std::vector<float>> RandomGrads(const TestParams& params, std::mt19937& rng, float amplitude);

// The standard parameter set of the tests: two decayed matrices (one of a
// size that is not a multiple of 8), an excluded bias, a decayed vector.
std::vector<ParamSpec> StandardSpecs();

// fp64 reference of each optimizer kind, from its published formulas.
class ReferenceOptimizer {
 public:
  ReferenceOptimizer(const OptimizerConfig& config, std::vector<std::vector<double>> weights, std::vector<bool> decay);
  // One step with true gradients `grads` (already unscaled).
  void Step(double lr, const std::vector<std::vector<float>>& grads, double grad_scale);
  const std::vector<std::vector<double>>& weights() const { return w_; }

 private:
  void SgdStep(size_t i, double lr, const std::vector<double>& g);
  void AdamWStep(size_t i, double lr, const std::vector<double>& g);
  void LarsStep(size_t i, double lr, const std::vector<double>& g);
  void LambStep(size_t i, double lr, const std::vector<double>& g);

  OptimizerConfig c_;
  std::vector<std::vector<double>> w_, buf_, m_, v_;
  std::vector<bool> decay_;
  int64_t t_ = 0;
};

// max over elements of |got - want| / max(1, |want|) (relative error, with
// an absolute floor for elements near zero; weights are O(1)).
double MaxRelativeError(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want);

}  // namespace ringmaster::engine::optim::testing

#endif  // RINGMASTER_ENGINE_OPTIM_TEST_UTIL_H_
