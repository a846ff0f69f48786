// The optimizer over CUDA parameters: state on the device, one multi-tensor
// launch per step (engine/kernels/optim_update.h). Host code; the kernels are
// behind plain C++ launchers.
//
// The kernels read a table of the parameters (device pointers, sizes, the
// chunk list) from device memory. It is built at Create (copied and waited
// for: the step's stream is not known yet, and every stream must see it), and
// rebuilt inside Update only when a layer replaced its value or grad tensors:
// then on the step's stream, from page-locked staging (PinnedUpload), after
// waiting for the kernels that read the old table. A rebuild allocates and
// waits on the host, so it cannot happen inside a CUDA graph capture: Update
// returns FAILED_PRECONDITION there (the step graph runner then trains
// eagerly, where the rebuild succeeds).
//
// Every copy is ordered on the step's stream (device_step_.stream): the
// backend's compute stream is non-blocking, so it does not wait for work on
// the legacy default stream.
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
#include "engine/optim/pinned_upload.h"
#include "engine/optim/update_rules.h"

namespace ringmaster::engine::optim {
namespace {

// A zeroed f32 device tensor on the current device (cudaMalloc, freed with the
// last handle): the state of an optimizer created without a DeviceZerosFn
// (tests, benches; the trainer passes its backend's allocator). The memset is
// waited for, so that work on any stream sees zeros. An allocation failure is
// fatal here, as it is for tensors the backend allocates (ops are void).
Tensor DeviceZeros(const Shape& shape) {
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * sizeof(float);
  void* data = nullptr;
  absl::Status status = CUDA_STATUS(cudaMalloc(&data, bytes == 0 ? 1 : bytes));
  if (status.ok()) status = CUDA_STATUS(cudaMemsetAsync(data, 0, bytes, nullptr));
  if (status.ok()) status = CUDA_STATUS(cudaStreamSynchronize(nullptr));
  if (!status.ok()) {
    std::fprintf(stderr, "optimizer state allocation of %zu bytes failed: %s\n", bytes, status.ToString().c_str());
    std::abort();
  }
  auto storage = std::make_shared<Storage>(data, bytes, Device::kCuda, [](void* p) { cudaFree(p); });
  return Tensor(std::move(storage), shape, DType::kF32);
}

absl::Status LaunchStatus(int error, const char* what) {
  if (error == 0) return absl::OkStatus();
  return CudaStatus(static_cast<cudaError_t>(error), what, __FILE__, __LINE__);
}

// The table the kernels read, and the scratch of the norms (LARS, LAMB).
struct DeviceTables {
  DeviceBuffer entries;   // kernels::MultiTensorEntry[num_entries]
  DeviceBuffer chunks;    // kernels::TensorChunk[num_chunks]
  DeviceBuffer partials;  // double[num_chunks]
  DeviceBuffer w_sums;    // double[num_entries]
  DeviceBuffer u_sums;    // double[num_entries]
};

absl::StatusOr<DeviceBuffer> AllocateArray(size_t n, size_t element_bytes) {
  return DeviceBuffer::Allocate(std::max<size_t>(n, 1) * element_bytes);
}

class CudaOptimizer final : public Optimizer {
 public:
  CudaOptimizer(const OptimizerConfig& c, const ParameterList& params, std::vector<ParamRange> ranges,
                std::vector<std::string> slots, const DeviceZerosFn& device_zeros)
      : Optimizer(c, params, std::move(ranges), std::move(slots), nullptr, Device::kCuda,
                  device_zeros ? device_zeros : DeviceZerosFn(DeviceZeros)) {}

  // Builds the table from the current parameter tensors and enqueues its copy
  // on `stream`; `wait`: until the copy is done. On error the previous table
  // stays in use.
  absl::Status BuildTable(cudaStream_t stream, bool wait) {
    ASSIGN_OR_RETURN(bool capturing, StreamIsCapturing(stream));
    if (capturing) {
      return absl::FailedPreconditionError(
          "the optimizer's parameter table is out of date (a layer replaced its value or grad tensors), and "
          "rebuilding it (cudaMalloc, a copy, a host wait) is not possible inside a CUDA graph capture; "
          "run a step eagerly first");
    }
    // The update kernels enqueued before may still read the old table, which
    // is freed below.
    if (launched_) CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(launch_stream_));
    std::vector<kernels::MultiTensorEntry> host;
    std::vector<std::pair<void*, void*>> tensor_data;
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
      tensor_data.push_back({e.param->value.raw(), e.param->grad.raw()});
    }
    std::vector<kernels::TensorChunk> chunks = kernels::MakeTensorChunks(host);
    DeviceTables fresh;
    ASSIGN_OR_RETURN(fresh.entries, AllocateArray(host.size(), sizeof(kernels::MultiTensorEntry)));
    ASSIGN_OR_RETURN(fresh.chunks, AllocateArray(chunks.size(), sizeof(kernels::TensorChunk)));
    ASSIGN_OR_RETURN(fresh.partials, AllocateArray(chunks.size(), sizeof(double)));
    ASSIGN_OR_RETURN(fresh.w_sums, AllocateArray(host.size(), sizeof(double)));
    ASSIGN_OR_RETURN(fresh.u_sums, AllocateArray(host.size(), sizeof(double)));
    RETURN_IF_ERROR(upload_.Enqueue({{host.data(), fresh.entries.data(), host.size() * sizeof(host[0])},
                                     {chunks.data(), fresh.chunks.data(), chunks.size() * sizeof(chunks[0])}},
                                    stream));
    if (wait) RETURN_IF_ERROR(upload_.Wait());
    tables_ = std::move(fresh);  // frees the old table: nothing reads it any more
    tensor_data_ = std::move(tensor_data);
    table_ = {static_cast<const kernels::MultiTensorEntry*>(tables_.entries.data()),
              static_cast<const kernels::TensorChunk*>(tables_.chunks.data()), static_cast<int>(host.size()),
              static_cast<int>(chunks.size())};
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

  cudaStream_t stream() const { return static_cast<cudaStream_t>(device_step_.stream); }

  absl::Status Update(float lr, float grad_scale, int64_t step) override {
    if (!TableCurrent()) RETURN_IF_ERROR(BuildTable(stream(), /*wait=*/false));
    launched_ = true;
    launch_stream_ = stream();
    void* s = device_step_.stream;
    const kernels::DeviceStepControl* control = device_step_.control;
    const kernels::OptimScratch scratch{static_cast<double*>(tables_.partials.data()),
                                        static_cast<double*>(tables_.w_sums.data()),
                                        static_cast<double*>(tables_.u_sums.data())};
    const kernels::AdamHyper adam{lr, config_.beta1, config_.beta2, config_.eps, step, grad_scale};
    switch (config_.kind) {
      case OptimizerKind::kSgd: {
        const kernels::SgdHyper h{lr, config_.momentum, config_.nesterov ? 1 : 0, grad_scale};
        return LaunchStatus(kernels::LaunchSgdUpdate(table_, h, control, s), "LaunchSgdUpdate");
      }
      case OptimizerKind::kAdamW:
        return LaunchStatus(kernels::LaunchAdamWUpdate(table_, adam, control, s), "LaunchAdamWUpdate");
      case OptimizerKind::kLars: {
        const kernels::LarsHyper h{lr, config_.momentum, config_.trust_coefficient, grad_scale};
        return LaunchStatus(kernels::LaunchLarsUpdate(table_, h, control, scratch, s), "LaunchLarsUpdate");
      }
      case OptimizerKind::kLamb:
        return LaunchStatus(kernels::LaunchLambUpdate(table_, adam, control, scratch, s), "LaunchLambUpdate");
    }
    return absl::InternalError("unknown optimizer kind");
  }

  // Errors in these hooks are CUDA faults the next Synchronize of the backend
  // reports as well; they are logged here, as the hooks return nothing. All
  // are ordered on the step's stream.
  void ZeroTensor(const Tensor& t) override { Report(CUDA_STATUS(cudaMemsetAsync(t.raw(), 0, t.bytes(), stream()))); }

  // A page-locked host_dst makes this a DMA at the full rate; a pageable one
  // goes through the driver's staging.
  void ExportSlot(const Tensor& slot, const Tensor& host_dst) const override {
    Report(CUDA_STATUS(cudaMemcpyAsync(host_dst.raw(), slot.raw(), slot.bytes(), cudaMemcpyDeviceToHost, stream())));
    Report(CUDA_STATUS(cudaStreamSynchronize(stream())));
  }

  // Once, after a resume (LoadState): a pageable source, which the driver
  // copies into its own staging before the call returns (so `host_src` may go
  // at once); the copy reaches the device in the stream's order, before any
  // kernel enqueued after it.
  void ImportSlot(const Tensor& host_src, const Tensor& slot) override {
    Report(CUDA_STATUS(cudaMemcpyAsync(slot.raw(), host_src.raw(), slot.bytes(), cudaMemcpyHostToDevice, stream())));
  }

  static void Report(const absl::Status& status) {
    if (!status.ok()) std::fprintf(stderr, "optimizer: %s\n", status.ToString().c_str());
  }

  std::vector<std::pair<void*, void*>> tensor_data_;  // value/grad data the table was built from
  DeviceTables tables_;
  PinnedUpload upload_;  // after tables_: destroyed first, it waits for the copies into them
  kernels::MultiTensorTable table_;
  bool launched_ = false;               // an update kernel was enqueued
  cudaStream_t launch_stream_ = nullptr;  // on this stream, last
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
  // The step's stream is set later (SetDeviceStep): the copy goes on the
  // default stream and is waited for, so that every stream sees the table.
  RETURN_IF_ERROR(optimizer->BuildTable(nullptr, /*wait=*/true));
  return std::unique_ptr<Optimizer>(std::move(optimizer));
}

}  // namespace ringmaster::engine::optim
