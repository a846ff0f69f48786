#ifndef RINGMASTER_ENGINE_OPTIM_STEP_SCALER_H_
#define RINGMASTER_ENGINE_OPTIM_STEP_SCALER_H_

// StepScaler: what a training step decides between backward and the update —
// the inf/NaN check, the global gradient norm, clipping, the skip decision and
// the dynamic loss scale (LossScaler's policy) — behind one interface, so that
// the trainer has one step loop whatever its device:
//   * HostStepScaler (below): host grads, decided on the host at once;
//   * DeviceLossScaler (device_loss_scaler.h): CUDA grads, decided on the
//     device with no host synchronisation before the step's end.
// The sequence, the same for both (Trainer::StepBody runs it):
//
//   backend.NonFiniteCheck(grads, scaler.flag());    // loss scaling enabled only
//   scaler.LocalSumSquares();                        // this rank's part
//   scaler.SumSquaresOverRanks(n, all_gather);       // per group holding parts
//   SumOverGroups(groups, scaler.flag());            // one rank's overflow skips all
//   scaler.Decide(max_norm);                         // norm, clip, skip
//   u = scaler.Update(); if (u.apply) optimizer.Step(lr, u.grad_scale);
//   scaler.Epilogue();                               // scale, counters, flag cleared
//   backend.Synchronize(); scaler.Snapshot();        // what the host reports
//
// Disabled (bf16/fp32): never skips; the norm and clipping still apply.
// Not thread-safe: the training thread owns it.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/tensor.h"
#include "engine/optim/loss_scaler.h"

namespace ringmaster::engine::optim {

// What the host knows after a step.
struct StepSnapshot {
  LossScalerState scaler;         // the scale for the next step, counters
  int64_t optimizer_steps = 0;    // updates applied
  bool skipped = false;           // the last step's update was skipped
  double grad_norm = 0.0;         // the last step's true-gradient norm (0 when skipped)
};

// How the optimizer applies a step's update, after Decide.
struct OptimizerUpdate {
  bool apply = true;        // false: skip Optimizer::Step
  float grad_scale = 1.0f;  // Optimizer::Step's grad_scale (clip / loss scale)
};

class StepScaler {
 public:
  virtual ~StepScaler() = default;

  // f32 [1] on the grads' device: the flag Backend::NonFiniteCheck ORs into.
  // Cleared by Epilogue for the next step.
  virtual Tensor flag() const = 0;
  // The sum of grad^2 of this scaler's grads (fp64).
  virtual absl::Status LocalSumSquares() = 0;
  // The sum of squares <- the sum of every rank's (fp64, added in rank order:
  // the same value on every rank). `all_gather(in, out)` does what
  // ProcessGroup::AllGather does: `in` is i32 [2] (the fp64's bytes), `out`
  // i32 [2 * ranks].
  using AllGatherFn = std::function<absl::Status(const Tensor& in, const Tensor& out)>;
  virtual absl::Status SumSquaresOverRanks(int ranks, const AllGatherFn& all_gather) = 0;
  // The skip decision (enabled, and the flag set or a sum that is not
  // finite), the norm sqrt(sum) / scale and the clip coefficient
  // (ClipCoefficient; max_norm <= 0: none).
  virtual absl::Status Decide(float max_norm) = 0;
  // After Decide: host, apply = !skip and grad_scale = clip / scale; device,
  // apply always with grad_scale 1 (the optimizer kernels read the decision).
  virtual OptimizerUpdate Update() const = 0;
  // The scale update (LossScaler::Update), the counters, the flag cleared.
  virtual absl::Status Epilogue() = 0;
  // As of the last Epilogue (device: once the stream has passed it).
  virtual StepSnapshot Snapshot() const = 0;
  // Loss scale for the next backward.
  float scale() const { return Snapshot().scaler.scale; }
  // Restores a checkpoint's state. INVALID_ARGUMENT as LossScaler::LoadState,
  // or for a negative step count; nothing changed then.
  virtual absl::Status LoadState(const LossScalerState& state, int64_t optimizer_steps) = 0;

  // LocalSumSquares then Decide.
  absl::Status Prologue(float max_norm);
};

// The step control on the host, over host f32 grads whose storage outlives it.
class HostStepScaler final : public StepScaler {
 public:
  // INVALID_ARGUMENT for a bad config (LossScaler::Create's checks) or a grad
  // that is not a host f32 tensor.
  static absl::StatusOr<std::unique_ptr<HostStepScaler>> Create(const LossScalerConfig& config,
                                                                std::vector<Tensor> grads);

  Tensor flag() const override { return flag_; }
  absl::Status LocalSumSquares() override;
  absl::Status SumSquaresOverRanks(int ranks, const AllGatherFn& all_gather) override;
  absl::Status Decide(float max_norm) override;
  OptimizerUpdate Update() const override { return {!skip_, grad_scale_}; }
  absl::Status Epilogue() override;
  StepSnapshot Snapshot() const override { return snapshot_; }
  absl::Status LoadState(const LossScalerState& state, int64_t optimizer_steps) override;

 private:
  HostStepScaler(LossScaler policy, std::vector<Tensor> grads);

  LossScaler policy_;
  const std::vector<Tensor> grads_;
  Tensor flag_;
  double sum_squares_ = 0.0;
  bool skip_ = false;
  float grad_scale_ = 1.0f;
  double grad_norm_ = 0.0;
  StepSnapshot snapshot_;
};

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_STEP_SCALER_H_
