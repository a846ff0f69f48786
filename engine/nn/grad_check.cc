#include "engine/nn/grad_check.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace ringmaster::engine::nn::testing {

double WeightedSum(const Tensor& y, const Tensor& w) {
  std::vector<float> yv = y.ToVector(), wv = w.ToVector();
  double s = 0.0;
  for (size_t i = 0; i < yv.size(); ++i) s += static_cast<double>(yv[i]) * wv[i];
  return s;
}

double GradCheck(const std::function<double()>& loss, const std::vector<GradTarget>& targets,
                 const GradCheckOptions& o, std::string* report) {
  double worst = 0.0;
  for (const GradTarget& t : targets) {
    const int64_t n = t.value.numel();
    const int64_t count = std::min<int64_t>(n, o.max_elements);
    std::vector<float> ana = t.analytic.ToVector();
    for (int64_t c = 0; c < count; ++c) {
      const int64_t i = count == n ? c : c * (n - 1) / (count - 1);
      float* p = t.value.f32() + i;
      const float saved = *p;
      *p = saved + o.eps;
      const double lp = loss();
      *p = saved - o.eps;
      const double lm = loss();
      *p = saved;
      const double num = (lp - lm) / (2.0 * o.eps);
      const double ratio = std::fabs(num - ana[i]) / (o.atol + o.rtol * std::fabs(ana[i]));
      if (ratio > worst) {
        worst = ratio;
        if (report != nullptr)
          *report = absl::StrFormat("%s[%d]: numeric %.6g analytic %.6g", t.name, i, num, ana[i]);
      }
    }
  }
  return worst;
}

}  // namespace ringmaster::engine::nn::testing
