#ifndef RINGMASTER_ENGINE_OPTIM_DEVICE_LOSS_SCALER_H_
#define RINGMASTER_ENGINE_OPTIM_DEVICE_LOSS_SCALER_H_

// DeviceLossScaler: the StepScaler (step_scaler.h) of training on a CUDA
// device. It owns a kernels::DeviceStepControl in device memory and runs the
// inf/NaN decision, the global gradient norm, clipping and the dynamic loss
// scale there, with LossScaler's policy, so that no host synchronisation sits
// between backward and the optimizer (engine/kernels/loss_scale.h has the
// kernels' sequence). StepScaler's sequence applies, with the optimizer told
// where the decision lives:
//
//   optimizer.SetDeviceStep({stream, scaler.control()});   // once
//   ... optimizer.Step(lr, 1.0f)                           // a no-op when skipped
//
// The host copy of the control block is refreshed by every Epilogue and valid
// once the stream has passed it (after the step's Synchronize); the host reads
// it for reports, checkpoints, the next step's loss scale and the optimizer's
// step count.
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
#include "engine/optim/step_scaler.h"

namespace ringmaster::kernels {
struct DeviceStepControl;  // engine/kernels/loss_scale.h
}  // namespace ringmaster::kernels

namespace ringmaster::engine::optim {

class DeviceLossScaler : public StepScaler {
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

  // The control block (device memory) for Optimizer::SetDeviceStep.
  virtual const kernels::DeviceStepControl* control() const = 0;
  // The optimizer kernels read the skip decision and grad_scale from the
  // control block: always apply, with grad_scale 1.
  OptimizerUpdate Update() const override { return {true, 1.0f}; }
  // The rest (StepScaler): on the device, ordered on the stream; the host
  // copy of the control block is refreshed by every Epilogue and valid once
  // the stream has passed it.
};

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_DEVICE_LOSS_SCALER_H_
