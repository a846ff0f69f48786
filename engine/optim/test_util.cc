#include "engine/optim/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ringmaster::engine::optim::testing {
namespace {

double Norm(const std::vector<double>& x) {
  double s = 0;
  for (double e : x) s += e * e;
  return std::sqrt(s);
}

}  // namespace

TestParams::TestParams(const std::vector<ParamSpec>& specs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const ParamSpec& s : specs) {
    auto p = std::make_unique<Parameter>();
    p->name = s.name;
    p->decay = s.decay;
    p->value = Tensor::Empty(s.shape);
    for (int64_t i = 0; i < p->value.numel(); ++i) p->value.f32()[i] = uniform(rng);
    p->grad = Tensor::Zeros(s.shape);
    params_.push_back(std::move(p));
  }
}

std::unique_ptr<TestParams> TestParams::Clone() const {
  std::unique_ptr<TestParams> out(new TestParams());
  for (const auto& p : params_) {
    auto q = std::make_unique<Parameter>();
    q->name = p->name;
    q->decay = p->decay;
    q->value = Tensor::FromVector(p->value.shape(), p->value.ToVector());
    q->grad = Tensor::FromVector(p->grad.shape(), p->grad.ToVector());
    out->params_.push_back(std::move(q));
  }
  return out;
}

ParameterList TestParams::list() const {
  ParameterList out;
  for (const auto& p : params_) out.push_back(p.get());
  return out;
}

std::vector<std::vector<double>> TestParams::Values() const {
  std::vector<std::vector<double>> out;
  for (const auto& p : params_) {
    std::vector<float> v = p->value.ToVector();
    out.emplace_back(v.begin(), v.end());
  }
  return out;
}

void TestParams::SetGrads(const std::vector<std::vector<float>>& grads, float scale) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    for (size_t j = 0; j < grads[i].size(); ++j) params_[i]->grad.f32()[j] = grads[i][j] * scale;
  }
}

std::vector<std::vector<float>> RandomGrads(const TestParams& params, std::mt19937& rng, float amplitude) {
  std::uniform_real_distribution<float> uniform(-amplitude, amplitude);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<float> g(params[i].value.numel());
    for (float& x : g) x = uniform(rng);
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<ParamSpec> StandardSpecs() {
  return {{"layers.0.weight", {16, 9}, true},
          {"layers.0.bias", {16}, false},
          {"layers.1.weight", {3, 7}, true},
          {"head.weight", {37}, true}};
}

ReferenceOptimizer::ReferenceOptimizer(const OptimizerConfig& config, std::vector<std::vector<double>> weights,
                                       std::vector<bool> decay)
    : c_(config), w_(std::move(weights)), decay_(std::move(decay)) {
  for (const auto& w : w_) {
    buf_.emplace_back(w.size(), 0.0);
    m_.emplace_back(w.size(), 0.0);
    v_.emplace_back(w.size(), 0.0);
  }
}

void ReferenceOptimizer::Step(double lr, const std::vector<std::vector<float>>& grads, double grad_scale) {
  ++t_;
  for (size_t i = 0; i < w_.size(); ++i) {
    std::vector<double> g(grads[i].size());
    for (size_t j = 0; j < g.size(); ++j) g[j] = grad_scale * grads[i][j];
    switch (c_.kind) {
      case OptimizerKind::kSgd:
        SgdStep(i, lr, g);
        break;
      case OptimizerKind::kAdamW:
        AdamWStep(i, lr, g);
        break;
      case OptimizerKind::kLars:
        LarsStep(i, lr, g);
        break;
      case OptimizerKind::kLamb:
        LambStep(i, lr, g);
        break;
    }
  }
}

// torch.optim.SGD documentation: g += wd*w; b = g (t = 1) or mu*b + g;
// g = g + mu*b (Nesterov) or b; w -= lr*g.
void ReferenceOptimizer::SgdStep(size_t i, double lr, const std::vector<double>& grad) {
  const double wd = decay_[i] ? c_.weight_decay : 0.0, mu = c_.momentum;
  for (size_t j = 0; j < grad.size(); ++j) {
    double g = grad[j] + wd * w_[i][j];
    if (mu != 0.0) {
      buf_[i][j] = t_ == 1 ? g : mu * buf_[i][j] + g;
      g = c_.nesterov ? g + mu * buf_[i][j] : buf_[i][j];
    }
    w_[i][j] -= lr * g;
  }
}

// torch.optim.AdamW documentation: w -= lr*wd*w; m, v; mhat = m/(1-b1^t),
// vhat = v/(1-b2^t); w -= lr*mhat/(sqrt(vhat)+eps).
void ReferenceOptimizer::AdamWStep(size_t i, double lr, const std::vector<double>& g) {
  const double wd = decay_[i] ? c_.weight_decay : 0.0;
  const double b1 = c_.beta1, b2 = c_.beta2;
  for (size_t j = 0; j < g.size(); ++j) {
    w_[i][j] -= lr * wd * w_[i][j];
    m_[i][j] = b1 * m_[i][j] + (1 - b1) * g[j];
    v_[i][j] = b2 * v_[i][j] + (1 - b2) * g[j] * g[j];
    const double mhat = m_[i][j] / (1 - std::pow(b1, t_));
    const double vhat = v_[i][j] / (1 - std::pow(b2, t_));
    w_[i][j] -= lr * mhat / (std::sqrt(vhat) + c_.eps);
  }
}

// LARS: local_lr = eta*||w||/(||g|| + wd*||w||); b = mu*b + local_lr*(g + wd*w);
// w -= lr*b. Excluded parameters: b = mu*b + g.
void ReferenceOptimizer::LarsStep(size_t i, double lr, const std::vector<double>& g) {
  double trust = 1.0, wd = 0.0;
  if (decay_[i]) {
    wd = c_.weight_decay;
    const double wn = Norm(w_[i]), gn = Norm(g);
    if (wn > 0 && gn > 0) trust = c_.trust_coefficient * wn / (gn + wd * wn);
  }
  for (size_t j = 0; j < g.size(); ++j) {
    buf_[i][j] = c_.momentum * buf_[i][j] + trust * (g[j] + wd * w_[i][j]);
    w_[i][j] -= lr * buf_[i][j];
  }
}

// LAMB: r = mhat/(sqrt(vhat)+eps); u = r + wd*w; w -= lr*(||w||/||u||)*u.
// Excluded parameters: w -= lr*r.
void ReferenceOptimizer::LambStep(size_t i, double lr, const std::vector<double>& g) {
  const double wd = decay_[i] ? c_.weight_decay : 0.0;
  const double b1 = c_.beta1, b2 = c_.beta2;
  std::vector<double> u(g.size());
  for (size_t j = 0; j < g.size(); ++j) {
    m_[i][j] = b1 * m_[i][j] + (1 - b1) * g[j];
    v_[i][j] = b2 * v_[i][j] + (1 - b2) * g[j] * g[j];
    const double mhat = m_[i][j] / (1 - std::pow(b1, t_));
    const double vhat = v_[i][j] / (1 - std::pow(b2, t_));
    u[j] = mhat / (std::sqrt(vhat) + c_.eps) + wd * w_[i][j];
  }
  double trust = 1.0;
  if (decay_[i]) {
    const double wn = Norm(w_[i]), un = Norm(u);
    if (wn > 0 && un > 0) trust = wn / un;
  }
  for (size_t j = 0; j < g.size(); ++j) w_[i][j] -= lr * trust * u[j];
}

double MaxRelativeError(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want) {
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    for (size_t j = 0; j < want[i].size(); ++j) {
      const double err = std::abs(got[i][j] - want[i][j]) / std::max(1.0, std::abs(want[i][j]));
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
  }
  return worst;
}

}  // namespace ringmaster::engine::optim::testing
