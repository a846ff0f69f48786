// DeviceLossScaler over the CUDA runtime: the control block in device memory,
// its host copy in pinned memory, and the grad table of the global norm.
//
// Every copy is ordered on the scaler's stream (the compute stream, which is
// non-blocking: it does not wait for the legacy default stream). The grad
// table goes up once, at Create, from page-locked staging (PinnedUpload). The
// control block goes up from its pinned host copy, which the host writes only
// before the first upload (Init) or after a stream synchronisation
// (LoadState), and the device only after the upload in stream order
// (Epilogue's read-back): it stays unchanged until the device has read it. Nothing here allocates inside a CUDA graph
// capture (SumSquaresOverRanks refuses to).
#include "engine/optim/device_loss_scaler.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/core/cuda_status.h"
#include "engine/kernels/grad_norm.h"
#include "engine/kernels/loss_scale.h"
#include "engine/optim/pinned_upload.h"

namespace ringmaster::engine::optim {
namespace {

absl::Status LaunchStatus(int error, const char* what) {
  if (error == 0) return absl::OkStatus();
  return CudaStatus(static_cast<cudaError_t>(error), what, __FILE__, __LINE__);
}

kernels::LossScalePolicy PolicyOf(const LossScalerConfig& c) {
  kernels::LossScalePolicy p;
  p.enabled = c.enabled ? 1 : 0;
  p.growth_factor = c.growth_factor;
  p.backoff_factor = c.backoff_factor;
  p.growth_interval = c.growth_interval;
  p.min_scale = c.min_scale;
  p.max_scale = c.max_scale;
  return p;
}

class CudaLossScaler final : public DeviceLossScaler {
 public:
  CudaLossScaler(const LossScalerConfig& config, void* stream) : config_(config), stream_(stream) {}

  absl::Status Init(const std::vector<Tensor>& grads) {
    std::vector<kernels::MultiTensorEntry> entries;
    for (const Tensor& g : grads) {
      kernels::MultiTensorEntry e;
      e.w = g.f32();  // the sum of grad^2 reads only g
      e.g = g.f32();
      e.n = g.numel();
      entries.push_back(e);
    }
    std::vector<kernels::TensorChunk> chunks = kernels::MakeTensorChunks(entries);
    ASSIGN_OR_RETURN(entries_, DeviceBuffer::Allocate(std::max<size_t>(entries.size(), 1) * sizeof(entries[0])));
    ASSIGN_OR_RETURN(chunks_, DeviceBuffer::Allocate(std::max<size_t>(chunks.size(), 1) * sizeof(chunks[0])));
    ASSIGN_OR_RETURN(partials_, DeviceBuffer::Allocate(std::max<size_t>(chunks.size(), 1) * sizeof(double)));
    RETURN_IF_ERROR(upload_.Enqueue({{entries.data(), entries_.data(), entries.size() * sizeof(entries[0])},
                                     {chunks.data(), chunks_.data(), chunks.size() * sizeof(chunks[0])}},
                                    stream()));
    table_ = {static_cast<const kernels::MultiTensorEntry*>(entries_.data()),
              static_cast<const kernels::TensorChunk*>(chunks_.data()), static_cast<int>(entries.size()),
              static_cast<int>(chunks.size())};

    ASSIGN_OR_RETURN(control_, DeviceBuffer::Allocate(sizeof(kernels::DeviceStepControl)));
    ASSIGN_OR_RETURN(host_buffer_, PinnedBuffer::Allocate(sizeof(kernels::DeviceStepControl)));
    *host() = kernels::DeviceStepControl{};
    host()->loss_scale = config_.enabled ? config_.initial_scale : 1.0f;
    return control_.CopyFromHostAsync(host(), sizeof(kernels::DeviceStepControl), stream());
  }

  Tensor flag() const override {
    char* base = static_cast<char*>(control_.data());
    return Tensor::Wrap(base + offsetof(kernels::DeviceStepControl, found_nonfinite), {1}, DType::kF32,
                        Device::kCuda);
  }

  const kernels::DeviceStepControl* control() const override { return device_control(); }

  absl::Status LocalSumSquares() override {
    kernels::DeviceStepControl* c = device_control();
    RETURN_IF_ERROR(LaunchStatus(
        kernels::LaunchChunkSumSquares(table_, kernels::NormField::kGrads, partials(), stream_), "grad sum squares"));
    return LaunchStatus(kernels::LaunchTotalSum(partials(), table_.num_chunks, &c->grad_sum_squares, stream_),
                        "grad sum squares total");
  }

  absl::Status SumSquaresOverRanks(int ranks, const AllGatherFn& all_gather) override {
    if (ranks < 1) return absl::InvalidArgumentError(absl::StrCat("sum of squares over ", ranks, " ranks"));
    if (ranks == 1) return absl::OkStatus();
    const size_t bytes = static_cast<size_t>(ranks) * sizeof(double);
    if (gathered_.bytes() < bytes) {  // the first step; eager, before any capture
      ASSIGN_OR_RETURN(bool capturing, StreamIsCapturing(stream()));
      if (capturing) {
        return absl::FailedPreconditionError(
            "the loss scaler's buffer for the sum of squares over ranks must be allocated (cudaMalloc), which is "
            "not possible inside a CUDA graph capture; run a step eagerly first");
      }
      // A smaller buffer from before may still be read by kernels on the stream.
      if (gathered_.data() != nullptr) CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
      ASSIGN_OR_RETURN(gathered_, DeviceBuffer::Allocate(bytes));
    }
    double* sum = &device_control()->grad_sum_squares;
    const Tensor in = Tensor::Wrap(sum, {2}, DType::kI32, Device::kCuda);
    const Tensor out = Tensor::Wrap(gathered_.data(), {2 * ranks}, DType::kI32, Device::kCuda);
    RETURN_IF_ERROR(all_gather(in, out));
    return LaunchStatus(kernels::LaunchTotalSum(static_cast<const double*>(gathered_.data()), ranks, sum, stream_),
                        "grad sum squares over ranks");
  }

  absl::Status Decide(float max_norm) override {
    return LaunchStatus(kernels::LaunchStepPrologue(device_control(), max_norm, PolicyOf(config_), stream_),
                        "LaunchStepPrologue");
  }

  absl::Status Epilogue() override {
    RETURN_IF_ERROR(LaunchStatus(kernels::LaunchLossScaleUpdate(device_control(), PolicyOf(config_), stream_),
                                 "LaunchLossScaleUpdate"));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host(), device_control(), sizeof(kernels::DeviceStepControl),
                                         cudaMemcpyDeviceToHost, stream()));
    return absl::OkStatus();
  }

  StepSnapshot Snapshot() const override {
    const kernels::DeviceStepControl* h = host();
    StepSnapshot s;
    s.scaler = {h->loss_scale, h->clean_steps, h->skipped_steps};
    s.optimizer_steps = h->optimizer_steps;
    s.skipped = h->skip != 0;
    s.grad_norm = h->grad_norm;
    return s;
  }

  absl::Status LoadState(const LossScalerState& state, int64_t optimizer_steps) override {
    LossScaler check = LossScaler::Disabled();
    if (config_.enabled) {
      ASSIGN_OR_RETURN(check, LossScaler::Create(config_));
    }
    RETURN_IF_ERROR(check.LoadState(state));
    if (optimizer_steps < 0) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer step count must be >= 0, got ", optimizer_steps));
    }
    // Nothing pending reads or writes the host copy once the stream is done.
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
    kernels::DeviceStepControl* h = host();
    *h = kernels::DeviceStepControl{};
    h->loss_scale = state.scale;
    h->clean_steps = state.clean_steps;
    h->skipped_steps = state.skipped_steps;
    h->optimizer_steps = optimizer_steps;
    return control_.CopyFromHostAsync(h, sizeof(*h), stream());
  }

 private:
  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_); }
  kernels::DeviceStepControl* device_control() const {
    return static_cast<kernels::DeviceStepControl*>(control_.data());
  }
  kernels::DeviceStepControl* host() const { return static_cast<kernels::DeviceStepControl*>(host_buffer_.data()); }
  double* partials() const { return static_cast<double*>(partials_.data()); }

  const LossScalerConfig config_;
  void* const stream_;
  DeviceBuffer entries_, chunks_, partials_, control_;
  DeviceBuffer gathered_;  // every rank's sum of squares (SumSquaresOverRanks)
  PinnedUpload upload_;    // after the buffers: destroyed first, it waits for the copies into them
  kernels::MultiTensorTable table_;
  PinnedBuffer host_buffer_;  // one kernels::DeviceStepControl: the control block's host copy
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceLossScaler>> DeviceLossScaler::Create(const LossScalerConfig& config,
                                                                          const ParameterList& params, void* stream) {
  std::vector<Tensor> grads;
  for (const Parameter* p : params) {
    if (p == nullptr || !p->grad.defined() || p->grad.device() != Device::kCuda || p->grad.dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat("the device loss scaler needs CUDA f32 grads; parameter \"",
                                                     p == nullptr ? "(null)" : p->name, "\" has none"));
    }
    grads.push_back(p->grad);
  }
  return Create(config, grads, stream);
}

absl::StatusOr<std::unique_ptr<DeviceLossScaler>> DeviceLossScaler::Create(const LossScalerConfig& config,
                                                                          const std::vector<Tensor>& grads,
                                                                          void* stream) {
  if (config.enabled) RETURN_IF_ERROR(LossScaler::Create(config).status());
  for (const Tensor& g : grads) {
    if (!g.defined() || g.device() != Device::kCuda || g.dtype() != DType::kF32) {
      return absl::InvalidArgumentError("the device loss scaler needs CUDA f32 grads");
    }
  }
  auto scaler = std::make_unique<CudaLossScaler>(config, stream);
  RETURN_IF_ERROR(scaler->Init(grads));
  return std::unique_ptr<DeviceLossScaler>(std::move(scaler));
}

}  // namespace ringmaster::engine::optim
