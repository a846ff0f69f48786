// The optimizer over CUDA parameters: state on the device, one multi-tensor
// launch per step (engine/kernels/optim_update.h). Host code; the kernels are
// behind plain C++ launchers.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/core/cuda_status.h"
#include "engine/kernels/optim_update.h"
#include "engine/optim/update_rules.h"

namespace ringmaster::engine::optim {
namespace {

// A zeroed f32 device tensor on the current device (cudaMalloc, freed with the
// last handle): the state of an optimizer created without a DeviceZerosFn
// (tests, benches; the trainer passes its backend's allocator). An allocation
// failure is fatal here, as it is for tensors the backend allocates (ops are
// void).
Tensor DeviceZeros(const Shape& shape) {
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * sizeof(float);
  void* data = nullptr;
  absl::Status status = CUDA_STATUS(cudaMalloc(&data, bytes == 0 ? 1 : bytes));
  if (status.ok()) status = CUDA_STATUS(cudaMemset(data, 0, bytes));
  if (!status.ok()) {
    std::fprintf(stderr, "optimizer state allocation of %zu bytes failed: %s\n", bytes, status.ToString().c_str());
    std::abort();
  }
  auto storage = std::make_shared<Storage>(data, bytes, Device::kCuda, [](void* p) { cudaFree(p); });
  return Tensor(std::move(storage), shape, DType::kF32);
}

// Device memory for n objects of T, freed on destruction.
template <typename T>
class DeviceArray {
 public:
  absl::Status Assign(const T* host, size_t n) {
    ASSIGN_OR_RETURN(buffer_, DeviceBuffer::Allocate(std::max<size_t>(n, 1) * sizeof(T)));
    if (n > 0 && host != nullptr) RETURN_IF_ERROR(buffer_.CopyFromHost(host, n * sizeof(T)));
    return absl::OkStatus();
  }
  T* get() const { return static_cast<T*>(buffer_.data()); }

 private:
  DeviceBuffer buffer_;
};

absl::Status LaunchStatus(int error, const char* what) {
  if (error == 0) return absl::OkStatus();
  return CudaStatus(static_cast<cudaError_t>(error), what, __FILE__, __LINE__);
}

class CudaOptimizer final : public Optimizer {
 public:
  CudaOptimizer(const OptimizerConfig& c, const ParameterList& params, std::vector<ParamRange> ranges,
                std::vector<std::string> slots, const DeviceZerosFn& device_zeros)
      : Optimizer(c, params, std::move(ranges), std::move(slots), nullptr, Device::kCuda,
                  device_zeros ? device_zeros : DeviceZerosFn(DeviceZeros)) {}

  // Builds the multi-tensor table from the current parameter tensors.
  absl::Status BuildTable() {
    std::vector<kernels::MultiTensorEntry> host;
    tensor_data_.clear();
    for (const Entry& e : entries_) {
      kernels::MultiTensorEntry m;
      m.w = e.w();
      m.g = e.g();
      m.s0 = e.slots.size() > 0 ? e.slots[0].f32() : nullptr;
      m.s1 = e.slots.size() > 1 ? e.slots[1].f32() : nullptr;
      m.n = e.count;
      m.weight_decay = e.param->decay ? config_.weight_decay : 0.0f;
      m.trust = e.param->decay ? 1 : 0;
      host.push_back(m);
      tensor_data_.push_back({e.param->value.raw(), e.param->grad.raw()});
    }
    std::vector<kernels::TensorChunk> chunks = kernels::MakeTensorChunks(host);
    RETURN_IF_ERROR(entries_dev_.Assign(host.data(), host.size()));
    RETURN_IF_ERROR(chunks_dev_.Assign(chunks.data(), chunks.size()));
    RETURN_IF_ERROR(partials_.Assign(nullptr, chunks.size()));
    RETURN_IF_ERROR(w_sums_.Assign(nullptr, host.size()));
    RETURN_IF_ERROR(u_sums_.Assign(nullptr, host.size()));
    table_ = {entries_dev_.get(), chunks_dev_.get(), static_cast<int>(host.size()), static_cast<int>(chunks.size())};
    return absl::OkStatus();
  }

 private:
  // The layer may have replaced its tensors since the table was built.
  bool TableCurrent() const {
    if (tensor_data_.size() != entries_.size()) return false;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (tensor_data_[i].first != entries_[i].param->value.raw() ||
          tensor_data_[i].second != entries_[i].param->grad.raw()) {
        return false;
      }
    }
    return true;
  }

  absl::Status Update(float lr, float grad_scale, int64_t step) override {
    if (!TableCurrent()) RETURN_IF_ERROR(BuildTable());
    void* stream = device_step_.stream;
    const kernels::DeviceStepControl* control = device_step_.control;
    const kernels::OptimScratch scratch{partials_.get(), w_sums_.get(), u_sums_.get()};
    const kernels::AdamHyper adam{lr, config_.beta1, config_.beta2, config_.eps, step, grad_scale};
    switch (config_.kind) {
      case OptimizerKind::kSgd: {
        const kernels::SgdHyper h{lr, config_.momentum, config_.nesterov ? 1 : 0, grad_scale};
        return LaunchStatus(kernels::LaunchSgdUpdate(table_, h, control, stream), "LaunchSgdUpdate");
      }
      case OptimizerKind::kAdamW:
        return LaunchStatus(kernels::LaunchAdamWUpdate(table_, adam, control, stream), "LaunchAdamWUpdate");
      case OptimizerKind::kLars: {
        const kernels::LarsHyper h{lr, config_.momentum, config_.trust_coefficient, grad_scale};
        return LaunchStatus(kernels::LaunchLarsUpdate(table_, h, control, scratch, stream), "LaunchLarsUpdate");
      }
      case OptimizerKind::kLamb:
        return LaunchStatus(kernels::LaunchLambUpdate(table_, adam, control, scratch, stream), "LaunchLambUpdate");
    }
    return absl::InternalError("unknown optimizer kind");
  }

  // Errors in these hooks are CUDA faults the next Synchronize of the backend
  // reports as well; they are logged here, as the hooks return nothing.
  void ZeroTensor(const Tensor& t) override {
    Report(CUDA_STATUS(cudaMemsetAsync(t.raw(), 0, t.bytes(), static_cast<cudaStream_t>(device_step_.stream))));
  }

  Tensor SlotForExport(const Tensor& slot) const override {
    Tensor host = Tensor::Empty(slot.shape());
    Report(CUDA_STATUS(cudaStreamSynchronize(static_cast<cudaStream_t>(device_step_.stream))));
    Report(CUDA_STATUS(cudaMemcpy(host.raw(), slot.raw(), slot.bytes(), cudaMemcpyDeviceToHost)));
    return host;
  }

  void ImportSlot(const Tensor& host_src, const Tensor& slot) override {
    Report(CUDA_STATUS(cudaStreamSynchronize(static_cast<cudaStream_t>(device_step_.stream))));
    Report(CUDA_STATUS(cudaMemcpy(slot.raw(), host_src.raw(), slot.bytes(), cudaMemcpyHostToDevice)));
  }

  static void Report(const absl::Status& status) {
    if (!status.ok()) std::fprintf(stderr, "optimizer: %s\n", status.ToString().c_str());
  }

  std::vector<std::pair<void*, void*>> tensor_data_;  // value/grad data the table was built from
  DeviceArray<kernels::MultiTensorEntry> entries_dev_;
  DeviceArray<kernels::TensorChunk> chunks_dev_;
  DeviceArray<double> partials_, w_sums_, u_sums_;
  kernels::MultiTensorTable table_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> CreateCudaUpdateRule(const OptimizerConfig& config,
                                                                const ParameterList& params,
                                                                std::vector<ParamRange> ranges,
                                                                PartialSumReducer reduce_norms,
                                                                DeviceZerosFn device_zeros) {
  if (reduce_norms && (config.kind == OptimizerKind::kLars || config.kind == OptimizerKind::kLamb)) {
    return absl::FailedPreconditionError(absl::StrCat("a sharded (ZeRO-1) ", OptimizerKindName(config.kind),
                                                      " optimizer is not supported on CUDA parameters"));
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return absl::FailedPreconditionError("the optimizer's parameters are CUDA tensors, but no CUDA device is present");
  }
  auto optimizer =
      std::make_unique<CudaOptimizer>(config, params, std::move(ranges), StateSlotNames(config), device_zeros);
  RETURN_IF_ERROR(optimizer->BuildTable());
  return std::unique_ptr<Optimizer>(std::move(optimizer));
}

}  // namespace ringmaster::engine::optim
