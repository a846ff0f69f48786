// Trainer on a CUDA device: pinned staging of batches, the choice of CUDA
// graphs for the step (trainer_config.h's CudaGraphMode; StepGraphRunner runs
// them), and host copies for evaluation and checkpoints. On the host backend
// these are pass-throughs.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/train/backend_factory.h"
#include "engine/train/device_step.h"
#include "engine/train/trainer.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {

absl::Status Trainer::InitDevice() {
  staging_ = HostStaging::Create(*backend_);
  int64_t parameters = 0;
  for (const Parameter* p : TrainedParameters()) parameters += p->value.numel();
  ASSIGN_OR_RETURN(const bool use, UseCudaGraphs(config_, distributed() ? world_->size() : 1, parameters));
  if (use) {
    step_graphs_ = StepGraphRunner::Create(*backend_, staging_.get());
    if (step_graphs_ == nullptr) {
      return absl::FailedPreconditionError("resources.cuda_graphs: CUDA graphs need the CUDA backend");
    }
    spdlog::info("training step in CUDA graphs ({} parameters; cuda_graphs {})", parameters,
                 config_.cuda_graphs == CudaGraphMode::kOn ? "on" : "auto");
  }
  return backend_->Synchronize();
}

optim::DeviceZerosFn Trainer::DeviceZeros() {
  if (!on_device()) return nullptr;
  Backend* backend = backend_.get();
  return [backend](const Shape& shape) { return backend->Zeros(shape); };
}

absl::StatusOr<Batch> Trainer::ToBackend(const Batch& batch) {
  Batch out = batch;
  if (on_device()) {
    std::vector<Tensor> host, device;
    for (Tensor* t : {&out.images, &out.tokens, &out.targets}) {
      if (!t->defined() || t->device() != Device::kCpu) continue;
      host.push_back(*t);
      *t = backend_->Empty(t->shape(), t->dtype());
      device.push_back(*t);
    }
    if (staging_ == nullptr) {
      for (size_t i = 0; i < host.size(); ++i) backend_->CopyFromHost(host[i], device[i]);
    } else {
      RETURN_IF_ERROR(staging_->CopyTensors(host, device));
    }
  }
  out.images = nn::AsActivation(*backend_, out.images);  // f32 pixels, stored as activations are
  return out;
}

void Trainer::RefreshWeightOperands(const ParameterList& params) { nn::RefreshOperands(*backend_, params); }

Tensor Trainer::HostCopy(const Tensor& t) {
  if (t.device() == Device::kCpu) return t;
  return backend_->ToHost(t);
}

Tensor Trainer::SnapshotBuffer(const Tensor& like, size_t slot) {
  // The previous snapshot's memory, already paged in (or pinned): a fresh
  // allocation would fault in every page during the copy, which is most of
  // its time on the CPU; pinning on a device takes longer still.
  if (snapshot_buffers_.size() <= slot) snapshot_buffers_.resize(slot + 1);
  Tensor& buffer = snapshot_buffers_[slot];
  if (buffer.defined() && buffer.shape() == like.shape() && buffer.dtype() == like.dtype()) return buffer;
  buffer = Tensor();  // its memory first: the new one may need the room
  last_checkpoint_allocated_ = true;
  if (on_device() && !pinned_snapshot_failed_) {
    buffer = PinnedHostTensor(like.shape(), like.dtype());
    if (!buffer.defined()) {
      pinned_snapshot_failed_ = true;
      spdlog::warn("checkpoint snapshots go to pageable host memory: no page-locked memory to be had");
    }
  }
  if (!buffer.defined()) buffer = Tensor::Empty(like.shape(), like.dtype());
  return buffer;
}

Tensor Trainer::SnapshotCopy(const Tensor& t, size_t slot) {
  Tensor buffer = SnapshotBuffer(t, slot);
  if (t.device() != Device::kCpu) {
    backend_->CopyToHost(t, buffer);
  } else {
    std::memcpy(buffer.raw(), t.raw(), t.bytes());
  }
  return buffer;
}

void Trainer::CopyIntoLive(const Tensor& host, const Tensor& live) {
  if (live.device() == Device::kCpu) {
    std::memcpy(live.raw(), host.raw(), live.bytes());
  } else {
    backend_->CopyFromHost(host, live);
  }
}

}  // namespace ringmaster::engine
