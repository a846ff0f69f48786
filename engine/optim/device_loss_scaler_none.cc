// A build without CUDA: no device step control.
#include "engine/optim/device_loss_scaler.h"

#include "common/status_macros.h"

namespace ringmaster::engine::optim {

absl::StatusOr<std::unique_ptr<DeviceLossScaler>> DeviceLossScaler::Create(const LossScalerConfig& /*config*/,
                                                                          const ParameterList& /*params*/,
                                                                          void* /*stream*/) {
  return absl::FailedPreconditionError("the device loss scaler needs CUDA, and this binary was built without it");
}

absl::StatusOr<std::unique_ptr<DeviceLossScaler>> DeviceLossScaler::Create(const LossScalerConfig& /*config*/,
                                                                          const std::vector<Tensor>& /*grads*/,
                                                                          void* /*stream*/) {
  return absl::FailedPreconditionError("the device loss scaler needs CUDA, and this binary was built without it");
}

}  // namespace ringmaster::engine::optim
