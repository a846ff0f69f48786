// A build with CUDA: pinned staging and step graphs over a CudaBackend
// (device_step.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/core/cuda_status.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/kernels/loss_scale.h"
#include "engine/train/device_step.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

void LogIfError(const absl::Status& status) {
  if (!status.ok()) spdlog::warn("{}", status.ToString());
}

class CudaHostStaging final : public HostStaging {
 public:
  explicit CudaHostStaging(cudaStream_t stream) : stream_(stream) {}
  ~CudaHostStaging() override {
    for (Buffer* b : {&buffers_[0], &buffers_[1], &lr_buffer_}) {
      if (b->event != nullptr) {
        LogIfError(CUDA_STATUS(cudaEventSynchronize(b->event)));
        LogIfError(CUDA_STATUS(cudaEventDestroy(b->event)));
      }
      if (b->data != nullptr) LogIfError(CUDA_STATUS(cudaFreeHost(b->data)));
    }
  }

  absl::Status CopyToDevice(const std::vector<Copy>& copies) override {
    Buffer& b = buffers_[next_];
    next_ = (next_ + 1) % buffers_.size();
    return CopyThrough(b, copies);
  }

  absl::Status SetDeviceLr(const kernels::DeviceStepControl* control, float lr) override {
    struct {
      float lr;
      int32_t device_hyper;
    } value{lr, 1};
    static_assert(offsetof(kernels::DeviceStepControl, device_hyper) ==
                      offsetof(kernels::DeviceStepControl, lr) + sizeof(float),
                  "lr and device_hyper are adjacent");
    auto* dst = reinterpret_cast<char*>(const_cast<kernels::DeviceStepControl*>(control)) +
                offsetof(kernels::DeviceStepControl, lr);
    return CopyThrough(lr_buffer_, {{&value, dst, sizeof(value)}});  // its own buffer: batches keep alternating
  }

 private:
  struct Buffer {
    char* data = nullptr;  // cudaHostAlloc
    size_t capacity = 0;
    cudaEvent_t event = nullptr;  // recorded after the copies that read data
  };

  absl::Status CopyThrough(Buffer& b, const std::vector<Copy>& copies) {
    size_t total = 0;
    for (const Copy& c : copies) total += c.bytes;
    // The copies enqueued from this buffer last time must have read it.
    if (b.event != nullptr) CUDA_RETURN_IF_ERROR(cudaEventSynchronize(b.event));
    if (b.event == nullptr) CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&b.event, cudaEventDisableTiming));
    if (total > b.capacity) {
      if (b.data != nullptr) CUDA_RETURN_IF_ERROR(cudaFreeHost(b.data));
      b.data = nullptr;
      b.capacity = 0;
      CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void**>(&b.data), total, cudaHostAllocDefault));
      b.capacity = total;
    }
    size_t offset = 0;
    for (const Copy& c : copies) {
      if (c.bytes == 0) continue;
      std::memcpy(b.data + offset, c.src, c.bytes);
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(c.dst, b.data + offset, c.bytes, cudaMemcpyHostToDevice, stream_));
      offset += c.bytes;
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(b.event, stream_));
    return absl::OkStatus();
  }

  cudaStream_t stream_;
  std::array<Buffer, 2> buffers_;  // batches, in turn
  size_t next_ = 0;
  Buffer lr_buffer_;
};

class CudaStepGraphs final : public StepGraphs {
 public:
  explicit CudaStepGraphs(CudaBackend& backend) : backend_(backend) {}
  ~CudaStepGraphs() override {
    LogIfError(CUDA_STATUS(cudaStreamSynchronize(stream())));  // a replay may still run
    Destroy();
    backend_.allocator().ReleasePool(pool_id());
  }

  absl::Status RunInPool(const std::function<absl::Status()>& body) override {
    backend_.allocator().BeginPool(pool_id(), stream_key());
    absl::Status status = body();
    backend_.allocator().EndPool(stream_key());
    return status;
  }

  absl::Status Capture(const std::function<absl::Status()>& body) override {
    Destroy();
    RETURN_IF_ERROR(backend_.Synchronize());  // nothing of the eager steps pending, no old error
    CachingAllocator& allocator = backend_.allocator();
    const int64_t mallocs_before = allocator.stats().raw_mallocs;
    // kCapture: a block the warm-up did not leave in the pool is
    // RESOURCE_EXHAUSTED (the capture fails and the steps run eagerly), never
    // a cudaMalloc or cudaFree that would invalidate the capture.
    allocator.BeginPool(pool_id(), stream_key(), CachingAllocator::PoolMode::kCapture);
    absl::Status status = CUDA_STATUS(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    if (status.ok()) {
      status = body();
      // End the capture whatever happened, so that the stream is usable again.
      absl::Status end = CUDA_STATUS(cudaStreamEndCapture(stream(), &graph));
      if (status.ok()) status = end;
    }
    allocator.EndPool(stream_key());
    raw_mallocs_in_capture_ = allocator.stats().raw_mallocs - mallocs_before;
    // An op that failed inside the capture kept its error for Synchronize.
    absl::Status ops = backend_.Synchronize();
    if (status.ok()) status = ops;
    if (status.ok() && raw_mallocs_in_capture_ > 0) {
      status = absl::InternalError(absl::StrCat("the capture needed ", raw_mallocs_in_capture_,
                                                " cudaMalloc(s): the graph pool was not warmed up"));
    }
    if (status.ok()) status = CUDA_STATUS(cudaGraphInstantiateWithFlags(&exec_, graph, 0));
    if (graph != nullptr) LogIfError(CUDA_STATUS(cudaGraphDestroy(graph)));
    if (!status.ok()) {
      (void)cudaGetLastError();
      exec_ = nullptr;
    }
    return status;
  }

  bool captured() const override { return exec_ != nullptr; }

  absl::Status Launch() override {
    if (exec_ == nullptr) return absl::FailedPreconditionError("StepGraphs::Launch before a successful Capture");
    CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream()));
    return absl::OkStatus();
  }

  int64_t raw_mallocs_in_capture() const override { return raw_mallocs_in_capture_; }

 private:
  cudaStream_t stream() const { return backend_.compute_stream(); }
  uintptr_t stream_key() const { return reinterpret_cast<uintptr_t>(stream()); }
  // One pool per StepGraphs, keyed by its address (unique while it lives).
  uint64_t pool_id() const { return reinterpret_cast<uint64_t>(this); }
  void Destroy() {
    if (exec_ != nullptr) LogIfError(CUDA_STATUS(cudaGraphExecDestroy(exec_)));
    exec_ = nullptr;
  }

  CudaBackend& backend_;
  cudaGraphExec_t exec_ = nullptr;
  int64_t raw_mallocs_in_capture_ = 0;
};

}  // namespace

std::unique_ptr<HostStaging> HostStaging::Create(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) return nullptr;
  return std::make_unique<CudaHostStaging>(cuda->compute_stream());
}

Tensor PinnedHostTensor(const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  void* data = nullptr;
  const absl::Status allocated = CUDA_STATUS(cudaHostAlloc(&data, std::max<size_t>(bytes, 1), cudaHostAllocDefault));
  if (!allocated.ok()) {
    spdlog::warn("{} bytes of page-locked host memory: {}", bytes, allocated.ToString());
    return Tensor();
  }
  auto storage = std::make_shared<Storage>(data, bytes, Device::kCpu,
                                           [](void* p) { LogIfError(CUDA_STATUS(cudaFreeHost(p))); });
  return Tensor(std::move(storage), shape, dtype);
}

std::unique_ptr<StepGraphs> StepGraphs::Create(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) return nullptr;
  return std::make_unique<CudaStepGraphs>(*cuda);
}

absl::Status HostStaging::CopyTensors(const std::vector<Tensor>& host, const std::vector<Tensor>& device) {
  std::vector<Copy> copies;
  for (size_t i = 0; i < host.size(); ++i) {
    if (host[i].bytes() != device[i].bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("HostStaging: tensor ", i, " has ", host[i].bytes(),
                                                     " bytes, its device tensor ", device[i].bytes()));
    }
    copies.push_back({host[i].raw(), device[i].raw(), host[i].bytes()});
  }
  return CopyToDevice(copies);
}

}  // namespace ringmaster::engine
