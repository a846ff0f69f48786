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
// Not thread-safe: the training thread owns it. The header is plain C++; in a
// build without CUDA, Create returns FAILED_PRECONDITION.

#include <cstdint>
#include <memory>

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
  virtual ~DeviceLossScaler() = default;

  // f32 [1] on the device: the flag Backend::NonFiniteCheck ORs into. Cleared
  // by Epilogue for the next step.
  virtual Tensor flag() const = 0;
  // The control block (device memory) for Optimizer::SetDeviceStep.
  virtual const kernels::DeviceStepControl* control() const = 0;

  // Enqueues the global grad norm and the skip/clip decision (max_norm <= 0:
  // no clipping).
  virtual absl::Status Prologue(float max_norm) = 0;
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
