#include "engine/optim/step_scaler.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/optim/cpu_update.h"
#include "engine/optim/grad_norm.h"

namespace ringmaster::engine::optim {

absl::Status StepScaler::Prologue(float max_norm) {
  RETURN_IF_ERROR(LocalSumSquares());
  return Decide(max_norm);
}

absl::StatusOr<std::unique_ptr<HostStepScaler>> HostStepScaler::Create(const LossScalerConfig& config,
                                                                      std::vector<Tensor> grads) {
  LossScaler policy = LossScaler::Disabled();
  if (config.enabled) {
    ASSIGN_OR_RETURN(policy, LossScaler::Create(config));
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined() || g.device() != Device::kCpu || g.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("the host step scaler needs host f32 grads; grad ", i, " is ",
                                                     g.defined() ? DeviceName(g.device()) : "undefined"));
    }
  }
  return std::unique_ptr<HostStepScaler>(new HostStepScaler(policy, std::move(grads)));
}

HostStepScaler::HostStepScaler(LossScaler policy, std::vector<Tensor> grads)
    : policy_(policy), grads_(std::move(grads)), flag_(Tensor::Zeros({1})) {
  snapshot_.scaler = policy_.State();
}

absl::Status HostStepScaler::LocalSumSquares() {
  sum_squares_ = 0.0;
  for (const Tensor& g : grads_) sum_squares_ += SumSquares(g.f32(), g.numel());
  return absl::OkStatus();
}

absl::Status HostStepScaler::SumSquaresOverRanks(int ranks, const AllGatherFn& all_gather) {
  if (ranks < 1) return absl::InvalidArgumentError(absl::StrCat("sum of squares over ", ranks, " ranks"));
  if (ranks == 1) return absl::OkStatus();
  static_assert(sizeof(double) == 2 * sizeof(int32_t), "an fp64 travels as two i32");
  Tensor in = Tensor::Empty({2}, DType::kI32);
  std::memcpy(in.raw(), &sum_squares_, sizeof(double));
  Tensor out = Tensor::Empty({2 * ranks}, DType::kI32);
  RETURN_IF_ERROR(all_gather(in, out));
  double total = 0.0;
  for (int r = 0; r < ranks; ++r) {
    double part;
    std::memcpy(&part, static_cast<const char*>(out.raw()) + r * sizeof(double), sizeof(double));
    total += part;
  }
  sum_squares_ = total;
  return absl::OkStatus();
}

absl::Status HostStepScaler::Decide(float max_norm) {
  const float scale = policy_.scale();
  skip_ = policy_.enabled() && (flag_.f32()[0] != 0.0f || !std::isfinite(sum_squares_));
  if (skip_) {
    grad_norm_ = 0.0;
    grad_scale_ = 0.0f;
    return absl::OkStatus();
  }
  grad_norm_ = std::sqrt(sum_squares_) / scale;
  grad_scale_ = ClipCoefficient(grad_norm_, max_norm) / scale;
  return absl::OkStatus();
}

absl::Status HostStepScaler::Epilogue() {
  policy_.Update(skip_);
  flag_.f32()[0] = 0.0f;
  snapshot_.scaler = policy_.State();
  if (!skip_) ++snapshot_.optimizer_steps;
  snapshot_.skipped = skip_;
  snapshot_.grad_norm = grad_norm_;
  return absl::OkStatus();
}

absl::Status HostStepScaler::LoadState(const LossScalerState& state, int64_t optimizer_steps) {
  if (optimizer_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("optimizer step count must be >= 0, got ", optimizer_steps));
  }
  RETURN_IF_ERROR(policy_.LoadState(state));
  snapshot_ = StepSnapshot{};
  snapshot_.scaler = policy_.State();
  snapshot_.optimizer_steps = optimizer_steps;
  flag_.f32()[0] = 0.0f;
  return absl::OkStatus();
}

}  // namespace ringmaster::engine::optim
