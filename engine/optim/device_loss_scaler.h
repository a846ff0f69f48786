#ifndef RINGMASTER_ENGINE_OPTIM_DEVICE_LOSS_SCALER_H_
#define RINGMASTER_ENGINE_OPTIM_DEVICE_LOSS_SCALER_H_

// DeviceLossScaler: the step control of training on a CUDA device. It owns a
// kernels::DeviceStepControl in device memory and runs the inf/NaN decision,
// the global gradient norm, clipping and the dynamic loss scale there, with
// LossScaler's policy, so that no host synchronisation sits between backward
// and the optimizer (engine/kernels/loss_scale.h has the sequence):
//
//   backend.NonFiniteCheck(grads, scaler.flag());   // after the allreduce
//   RETURN_IF_ERROR(scaler.Prologue(max_norm));      // norm, clip, skip
//   optimizer.SetDeviceStep({stream, scaler.control()});
//   RETURN_IF_ERROR(optimizer.Step(lr, 1.0f));       // no-op when skip
//   RETURN_IF_ERROR(scaler.Epilogue());              // scale, counters; async copy back
//   RETURN_IF_ERROR(backend.Synchronize());          // the step's one sync
//   scaler.Snapshot()                                // host copy of the control block
//
// The host copy is refreshed by every Epilogue and valid once the stream has
// passed it (after the step's Synchronize); the host reads it for reports,
// checkpoints, the next step's loss scale, and the optimizer's step count.
// Also used with the scaler disabled (bf16/fp32): it then never skips, and
// still computes the gradient norm and clipping on the device.
//
// Gradients spread over ranks (ZeRO-1 shards, pipeline stages): Prologue in
// halves, with the partial sums combined in between, all on the device:
//
//   scaler.LocalSumSquares();                            // this rank's part
//   scaler.SumSquaresOverRanks(n, all_gather);           // per group holding parts
//   group.AllReduce(scaler.flag(), ReduceOp::kSum);      // one rank's overflow skips all
//   scaler.Decide(max_norm);
//
// Not thread-safe: the training thread owns it. The header is plain C++; in a
// build without CUDA, Create returns FAILED_PRECONDITION.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/parameter.h"
#include "engine/core/tensor.h"
#include "engine/optim/loss_scaler.h"

namespace ringmaster::kernels {
struct DeviceStepControl;  // engine/kernels/loss_scale.h
}  // namespace ringmaster::kernels

namespace ringmaster::engine::optim {

// What the host knows after a step (the control block read back).
struct DeviceStepSnapshot {
  LossScalerState scaler;         // the scale for the next step, counters
  int64_t optimizer_steps = 0;    // updates applied
  bool skipped = false;           // the last step's update was skipped
  double grad_norm = 0.0;         // the last step's true-gradient norm (0 when skipped)
};

class DeviceLossScaler {
 public:
  // `params`: CUDA f32 grads whose global norm is taken (every parameter the
  // optimizer updates). `stream`: the compute stream (a cudaStream_t).
  // INVALID_ARGUMENT for a bad config (LossScaler::Create's checks) or a host
  // grad; FAILED_PRECONDITION without CUDA.
  static absl::StatusOr<std::unique_ptr<DeviceLossScaler>> Create(const LossScalerConfig& config,
                                                                  const ParameterList& params, void* stream);
  // The same over bare CUDA f32 grads (e.g. a ZeRO-1 shard of averaged grads);
  // their pointers must stay valid for the scaler's life.
  static absl::StatusOr<std::unique_ptr<DeviceLossScaler>> Create(const LossScalerConfig& config,
                                                                  const std::vector<Tensor>& grads, void* stream);
  virtual ~DeviceLossScaler() = default;

  // f32 [1] on the device: the flag Backend::NonFiniteCheck ORs into. Cleared
  // by Epilogue for the next step.
  virtual Tensor flag() const = 0;
  // The control block (device memory) for Optimizer::SetDeviceStep.
  virtual const kernels::DeviceStepControl* control() const = 0;

  // Enqueues the global grad norm and the skip/clip decision (max_norm <= 0:
  // no clipping): LocalSumSquares then Decide.
  absl::Status Prologue(float max_norm);
  // Enqueues the sum of grad^2 of this scaler's grads into the control block.
  virtual absl::Status LocalSumSquares() = 0;
  // The control block's sum of squares <- the sum of every rank's (fp64,
  // added on the device in a fixed order: the same value on every rank). `all_gather(in, out)` must do what
  // ProcessGroup::AllGather does, on the device and ordered after the stream's
  // work: `in` is i32 [2] (the fp64's bytes), `out` i32 [2 * ranks].
  using AllGatherFn = std::function<absl::Status(const Tensor& in, const Tensor& out)>;
  virtual absl::Status SumSquaresOverRanks(int ranks, const AllGatherFn& all_gather) = 0;
  // Enqueues the skip/clip decision from the control block's flag and sum.
  virtual absl::Status Decide(float max_norm) = 0;
  // Enqueues the scale update and the copy of the control block to the host.
  virtual absl::Status Epilogue() = 0;

  // The host copy as of the last Epilogue the stream has passed.
  virtual DeviceStepSnapshot Snapshot() const = 0;
  // Loss scale for the next backward (Snapshot().scaler.scale).
  float scale() const { return Snapshot().scaler.scale; }

  // Restores a checkpoint's state (synchronous; the host copy too).
  // INVALID_ARGUMENT as LossScaler::LoadState.
  virtual absl::Status LoadState(const LossScalerState& state, int64_t optimizer_steps) = 0;
};

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_DEVICE_LOSS_SCALER_H_
