#ifndef RINGMASTER_ENGINE_NN_GRAD_CHECK_H_
#define RINGMASTER_ENGINE_NN_GRAD_CHECK_H_

// Central finite differences for layer tests (test-only).
//
// The scalar checked is L = sum_i w_i * y_i, accumulated in double, for a
// fixed random w; its analytic gradient comes from Backward(w). A perturbed
// element x_j gives (L(x_j + eps) - L(x_j - eps)) / (2 eps). With fp32 layers,
// inputs of order 1 and eps = 1e-2, the truncation error is O(eps^2 * f''')
// and the rounding error about 1e-6 * |L| / eps, so the tests accept
// |numeric - analytic| <= atol + rtol * |analytic| with atol = 2e-3 and
// rtol = 2e-2 unless they say otherwise.

#include <functional>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace ringmaster::engine::nn::testing {

struct GradTarget {
  std::string name;
  Tensor value;     // perturbed in place (host memory)
  Tensor analytic;  // its analytic gradient, already computed
};

struct GradCheckOptions {
  float eps = 1e-2f;
  double atol = 2e-3;
  double rtol = 2e-2;
  int max_elements = 24;  // elements checked per target (spread evenly)
};

// Largest violation ratio |num - ana| / (atol + rtol |ana|) over the checked
// elements of every target (<= 1 passes); `report` gets the worst element.
// `loss` re-runs the forward and returns L.
double GradCheck(const std::function<double()>& loss, const std::vector<GradTarget>& targets,
                 const GradCheckOptions& options, std::string* report);

// L = sum(w * y) in double.
double WeightedSum(const Tensor& y, const Tensor& w);

}  // namespace ringmaster::engine::nn::testing

#endif  // RINGMASTER_ENGINE_NN_GRAD_CHECK_H_
