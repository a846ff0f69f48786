// The loss scaler's kernels' source (loss_scale_kernels.cuh) run on the host
// through host_cuda, step for step against the host step scaler
// (engine/optim/step_scaler.h's HostStepScaler: LossScaler's policy,
// ClipCoefficient, the skip rule) on the same gradients: dynamic scaling
// (fp16) with overflow steps flagged by NonFiniteCheck and a step whose
// gradients hold a NaN with no flag (the sum of squares catches it), growth
// after the interval, back-off, the floor and the cap; and the disabled
// policy (bf16/fp32); each with clipping off and on. The control block
// starts as the trainer zeroes it.
//
// Comparisons: exact. Both sides form the norm as sqrt(sum) over the scale
// (the device multiplies by the fp32 inverse, exact for these power-of-two
// scales) from the same fp64 sum, and the same fp32 clip coefficient.

#include "engine/kernels/testing/host_cuda.h"
// After host_cuda.h: the kernels use its built-ins.
#include "engine/kernels/loss_scale_kernels.cuh"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/test_util.h"
#include "engine/optim/cpu_update.h"
#include "engine/optim/step_scaler.h"

namespace ringmaster::kernels {
namespace {

using engine::Tensor;

LossScalePolicy PolicyOf(const engine::optim::LossScalerConfig& c) {
  LossScalePolicy p;
  p.enabled = c.enabled ? 1 : 0;
  p.growth_factor = c.growth_factor;
  p.backoff_factor = c.backoff_factor;
  p.growth_interval = c.growth_interval;
  p.min_scale = c.min_scale;
  p.max_scale = c.max_scale;
  return p;
}

// Equal, or both NaN (the disabled policy passes a NaN norm through, as the host does).
::testing::AssertionResult SameFloat(float got, float want) {
  if (got == want || (std::isnan(got) && std::isnan(want))) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

void RunSteps(const engine::optim::LossScalerConfig& config, float max_norm) {
  // Overflow flags per step, and the steps whose grads hold a NaN unflagged.
  const std::vector<int> flagged = {0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<int> nan_grads = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  std::vector<Tensor> grads = {Tensor::FromVector({33}, std::vector<float>(33)),
                               Tensor::FromVector({1000}, std::vector<float>(1000))};
  auto host = engine::optim::HostStepScaler::Create(config, grads);
  ASSERT_TRUE(host.ok()) << host.status();
  const LossScalePolicy policy = PolicyOf(config);
  DeviceStepControl control;  // as the trainer starts it
  control.loss_scale = (*host)->scale();
  for (size_t step = 0; step < flagged.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    // This step's stored grads: true grads of norm ~ 1 to 10 times the loss scale.
    double sum = 0.0;
    for (size_t k = 0; k < grads.size(); ++k) {
      const std::vector<float> v = engine::testing::RandomVec(grads[k].numel(), 100 * step + k, -0.3f, 0.3f);
      for (int64_t i = 0; i < grads[k].numel(); ++i) grads[k].f32()[i] = v[i] * (1 + step % 4) * control.loss_scale;
      if (nan_grads[step] && k == 1) grads[k].f32()[7] = NAN;
      sum += engine::optim::SumSquares(grads[k].f32(), grads[k].numel());
    }
    (*host)->flag().f32()[0] = static_cast<float>(flagged[step]);
    ASSERT_TRUE((*host)->Prologue(max_norm).ok());
    const engine::optim::OptimizerUpdate update = (*host)->Update();
    ASSERT_TRUE((*host)->Epilogue().ok());
    const engine::optim::StepSnapshot snap = (*host)->Snapshot();

    control.found_nonfinite = static_cast<float>(flagged[step]);
    control.grad_sum_squares = sum;
    ASSERT_TRUE(host_cuda::Launch(dim3(1), dim3(1), 0, loss_scale::StepPrologueKernel, &control, max_norm, policy));
    EXPECT_EQ(control.skip != 0, !update.apply);
    EXPECT_TRUE(SameFloat(control.grad_norm, static_cast<float>(snap.grad_norm)));
    if (update.apply) {
      EXPECT_TRUE(SameFloat(control.grad_scale, update.grad_scale));
    }
    ASSERT_TRUE(host_cuda::Launch(dim3(1), dim3(1), 0, loss_scale::LossScaleUpdateKernel, &control, policy));
    EXPECT_EQ(control.loss_scale, snap.scaler.scale);
    EXPECT_EQ(control.clean_steps, snap.scaler.clean_steps);
    EXPECT_EQ(control.skipped_steps, snap.scaler.skipped_steps);
    EXPECT_EQ(control.optimizer_steps, snap.optimizer_steps);
    EXPECT_EQ(control.found_nonfinite, 0.0f);
  }
}

engine::optim::LossScalerConfig Dynamic() {
  engine::optim::LossScalerConfig c;
  c.enabled = true;
  c.initial_scale = 2048.0f;
  c.growth_interval = 3;
  c.min_scale = 64.0f;     // the run of five overflows reaches it
  c.max_scale = 2048.0f;   // the first growth is capped
  return c;
}

TEST(LossScaleTest, DynamicScalingMatchesTheHostStepScaler) {
  RunSteps(Dynamic(), 0.0f);
}

TEST(LossScaleTest, DynamicScalingWithClippingMatchesTheHostStepScaler) {
  RunSteps(Dynamic(), 1.5f);
}

TEST(LossScaleTest, DisabledPolicyMatchesTheHostStepScaler) {
  engine::optim::LossScalerConfig c;
  c.enabled = false;
  RunSteps(c, 0.0f);
  RunSteps(c, 1.5f);
}

}  // namespace
}  // namespace ringmaster::kernels
