#ifndef RINGMASTER_ENGINE_OPTIM_PINNED_UPLOAD_H_
#define RINGMASTER_ENGINE_OPTIM_PINNED_UPLOAD_H_

// PinnedUpload: host-to-device copies of the small tables the optimizer and
// the device loss scaler hand their kernels (parameter tables, chunk lists),
// ordered on the stream whose kernels read them, from page-locked staging it
// owns.
//
// Enqueue copies every source into the staging (growing it when needed),
// enqueues the copies on the stream and records an event after them; the
// staging stays unchanged until that event has passed: the next Enqueue, and
// the destructor, wait for it first. Kernels enqueued on the same stream after
// Enqueue see the data; work on other streams must wait for the stream (or
// the caller calls Wait).
//
// Nothing here may run inside a CUDA graph capture (it may allocate and it
// waits on the host): Enqueue returns FAILED_PRECONDITION while the stream is
// capturing, before touching anything.
//
// Internal to engine/optim (CUDA builds only). Not thread-safe: the training
// thread owns it.

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "engine/core/cuda_status.h"

namespace ringmaster::engine::optim {

class PinnedUpload {
 public:
  struct Copy {
    const void* src = nullptr;  // host memory (any); read during Enqueue only
    void* dst = nullptr;        // device memory
    size_t bytes = 0;
  };

  PinnedUpload() = default;
  PinnedUpload(const PinnedUpload&) = delete;
  PinnedUpload& operator=(const PinnedUpload&) = delete;
  // Waits until the device has read the staging (errors are logged).
  ~PinnedUpload();

  absl::Status Enqueue(const std::vector<Copy>& copies, cudaStream_t stream);
  // Blocks until the copies of the last Enqueue are done (at once if none).
  absl::Status Wait() const;

 private:
  PinnedBuffer staging_;
  CudaEvent copied_;  // recorded after the last Enqueue's copies; empty before the first
};

}  // namespace ringmaster::engine::optim

#endif  // RINGMASTER_ENGINE_OPTIM_PINNED_UPLOAD_H_
