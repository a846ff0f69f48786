#ifndef RINGMASTER_ENGINE_TRAIN_DEVICE_STEP_H_
#define RINGMASTER_ENGINE_TRAIN_DEVICE_STEP_H_

// CUDA machinery of the trainer's device step, behind plain C++ (no CUDA
// headers; device_step_cuda.cc, or device_step_none.cc in a build without
// CUDA, where Create returns nullptr):
//
//  * HostStaging: host -> device copies through page-locked memory, so that
//    cudaMemcpyAsync on the compute stream really is asynchronous (a pageable
//    source makes CUDA stage it synchronously). Two buffers, used in turn, each
//    with an event recorded after the copies that read it: a buffer is
//    refilled only once the device has read it (the host waits on that event,
//    which in a training loop has long passed).
//  * StepGraphs: CUDA graphs of the training step. Graph memory comes from a
//    private pool of the backend's caching allocator (caching_allocator.h), so
//    tensors the graph's kernels write on every replay are never handed to
//    anything else. Capture runs in cudaStreamCaptureModeThreadLocal on the
//    compute stream; no host synchronisation, cudaMalloc or cudaFree may happen
//    inside it: RunInPool warms the pool first, and during Capture the pool
//    serves only the blocks it holds (a miss fails that allocation, so the
//    capture fails and the steps stay eager).
//
// Not thread-safe: the training thread owns them.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/core/backend.h"

namespace ringmaster::kernels {
struct DeviceStepControl;  // engine/kernels/loss_scale.h
}  // namespace ringmaster::kernels

namespace ringmaster::engine {

class HostStaging {
 public:
  struct Copy {
    const void* src = nullptr;  // host memory (any)
    void* dst = nullptr;        // device memory
    size_t bytes = 0;
  };
  // Null for a backend that is not CUDA (or a build without CUDA).
  static std::unique_ptr<HostStaging> Create(Backend& backend);
  virtual ~HostStaging() = default;

  // Copies every src into the next pinned buffer (growing it when needed) and
  // enqueues the copies to their dst on the compute stream; returns once the
  // host side is done, without waiting for the device.
  virtual absl::Status CopyToDevice(const std::vector<Copy>& copies) = 0;
  // The same for tensors: each host tensor into the device tensor of the same
  // byte size.
  absl::Status CopyTensors(const std::vector<Tensor>& host, const std::vector<Tensor>& device);
  // Enqueues control->lr = lr and control->device_hyper = 1 (the optimizer
  // kernels then read both from the control block: a replayed graph's step).
  virtual absl::Status SetDeviceLr(const kernels::DeviceStepControl* control, float lr) = 0;
};

// A host tensor of `shape` in page-locked memory (cudaHostAlloc, freed with
// cudaFreeHost when its last handle goes, from any thread): device-to-host
// copies into it run at the full DMA rate, without the driver's pageable
// staging. For buffers kept and reused (a checkpoint's snapshot): pinning is
// slow and takes memory from the host's pageable pool. Undefined in a build
// without CUDA, or when the allocation fails (the caller falls back to
// pageable memory).
Tensor PinnedHostTensor(const Shape& shape, DType dtype);

class StepGraphs {
 public:
  // Null for a backend that is not CUDA (or a build without CUDA).
  static std::unique_ptr<StepGraphs> Create(Backend& backend);
  // Destroys the graph, then gives the pool back to the shared cache.
  virtual ~StepGraphs() = default;

  // Runs body() eagerly with the compute stream's allocations from the graph
  // pool (warm-up: the capture then finds the blocks it needs in the pool).
  virtual absl::Status RunInPool(const std::function<absl::Status()>& body) = 0;
  // Destroys the current graph, if any, and captures body() into a new one.
  // An error (body's, the capture's, or an op's, with the CUDA error and
  // file:line) leaves no graph; the compute stream is usable again.
  virtual absl::Status Capture(const std::function<absl::Status()>& body) = 0;
  virtual bool captured() const = 0;
  // Enqueues one replay on the compute stream.
  virtual absl::Status Launch() = 0;
  // cudaMallocs of the allocator during the last Capture (0 when warmed).
  virtual int64_t raw_mallocs_in_capture() const = 0;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_TRAIN_DEVICE_STEP_H_
