// A build without CUDA: no pinned staging or memory, no graphs (device_step.h).
#include "engine/train/device_step.h"

namespace ringmaster::engine {

std::unique_ptr<HostStaging> HostStaging::Create(Backend& /*backend*/) { return nullptr; }
std::unique_ptr<StepGraphs> StepGraphs::Create(Backend& /*backend*/) { return nullptr; }
Tensor PinnedHostTensor(const Shape& /*shape*/, DType /*dtype*/) { return Tensor(); }

absl::Status HostStaging::CopyTensors(const std::vector<Tensor>& /*host*/, const std::vector<Tensor>& /*device*/) {
  return absl::FailedPreconditionError("HostStaging: built without CUDA");
}

}  // namespace ringmaster::engine
