// Each optimizer minimises f(w) = 0.5 ||A w - b||^2 with b = A w_star, whose
// unique minimum is w_star (A has full column rank), to a stated tolerance
// in a stated number of steps, under a warm-up + cosine schedule.

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "engine/optim/lr_schedule.h"
#include "engine/optim/optimizer.h"
#include "gtest/gtest.h"

namespace ringmaster::engine::optim {
namespace {

constexpr int kRows = 12, kCols = 6;

class Quadratic {
 public:
  explicit Quadratic(uint32_t seed) : a_(kRows * kCols), w_star_(kCols), b_(kRows, 0.0) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0 / std::sqrt(kRows));
    for (double& x : a_) x = normal(rng);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    for (double& x : w_star_) x = uniform(rng);
    for (int r = 0; r < kRows; ++r) {
      for (int c = 0; c < kCols; ++c) b_[r] += a_[r * kCols + c] * w_star_[c];
    }
  }

  // f(w), and grad = A^T (A w - b) written to `grad` times `loss_scale`.
  double LossAndGrad(const float* w, float* grad, float loss_scale) const {
    std::vector<double> residual(kRows);
    double loss = 0.0;
    for (int r = 0; r < kRows; ++r) {
      double ax = 0.0;
      for (int c = 0; c < kCols; ++c) ax += a_[r * kCols + c] * w[c];
      residual[r] = ax - b_[r];
      loss += 0.5 * residual[r] * residual[r];
    }
    for (int c = 0; c < kCols; ++c) {
      double g = 0.0;
      for (int r = 0; r < kRows; ++r) g += a_[r * kCols + c] * residual[r];
      grad[c] = static_cast<float>(g * loss_scale);
    }
    return loss;
  }

  double DistanceToOptimum(const float* w) const {
    double d = 0.0;
    for (int c = 0; c < kCols; ++c) d += (w[c] - w_star_[c]) * (w[c] - w_star_[c]);
    return std::sqrt(d);
  }

 private:
  std::vector<double> a_, w_star_, b_;
};

struct Case {
  const char* name;
  OptimizerConfig config;
  float base_lr;
  int steps;
  double max_distance;  // ||w - w_star|| after `steps`
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ConvergenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ConvergenceTest, MinimisesQuadratic) {
  const Case& c = GetParam();
  const Quadratic q(5);
  Parameter p{"w", Tensor::Zeros({kCols}), Tensor::Zeros({kCols}), true};
  for (int i = 0; i < kCols; ++i) p.value.f32()[i] = 0.1f;  // away from zero (trust ratios need ||w|| > 0)
  auto opt = Optimizer::Create(c.config, {&p});
  ASSERT_TRUE(opt.ok()) << opt.status();
  LrScheduleConfig sc;
  sc.base_lr = c.base_lr;
  sc.warmup_steps = c.steps / 20;
  sc.decay = LrDecay::kCosine;
  sc.decay_steps = c.steps - sc.warmup_steps;
  sc.min_lr = 0.0f;
  auto schedule = LrSchedule::Create(sc);
  ASSERT_TRUE(schedule.ok()) << schedule.status();

  constexpr float kLossScale = 4096.0f;
  const double initial = q.LossAndGrad(p.value.f32(), p.grad.f32(), 1.0f);
  for (int step = 0; step < c.steps; ++step) {
    q.LossAndGrad(p.value.f32(), p.grad.f32(), kLossScale);
    ASSERT_TRUE((*opt)->Step(schedule->LearningRate((*opt)->step_count()), 1.0f / kLossScale).ok());
  }
  const double final_loss = q.LossAndGrad(p.value.f32(), p.grad.f32(), 1.0f);
  const double distance = q.DistanceToOptimum(p.value.f32());
  std::printf("%s: %d steps, loss %.3g -> %.3g, ||w - w_star|| = %.3g\n", c.name, c.steps, initial, final_loss,
              distance);
  EXPECT_LT(distance, c.max_distance) << c.name << ": loss " << initial << " -> " << final_loss;
  EXPECT_LT(final_loss, 1e-6 * initial) << c.name;
}

OptimizerConfig Make(OptimizerKind kind, float momentum = 0.9f) {
  OptimizerConfig c;
  c.kind = kind;
  c.momentum = momentum;
  c.weight_decay = 0.0f;  // decay would move the minimum away from w_star
  c.trust_coefficient = 0.01f;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ConvergenceTest,
                         ::testing::Values(Case{"SgdMomentum", Make(OptimizerKind::kSgd), 0.3f, 300, 1e-5},
                                           Case{"AdamW", Make(OptimizerKind::kAdamW), 0.05f, 1000, 1e-5},
                                           Case{"Lars", Make(OptimizerKind::kLars), 30.0f, 500, 1e-3},
                                           Case{"Lamb", Make(OptimizerKind::kLamb), 0.02f, 1000, 1e-4}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace ringmaster::engine::optim
