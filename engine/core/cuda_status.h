#ifndef RINGMASTER_ENGINE_CORE_CUDA_STATUS_H_
#define RINGMASTER_ENGINE_CORE_CUDA_STATUS_H_

// CUDA, NCCL, cuBLAS(Lt) and cuDNN result codes as absl::Status, and the RAII
// owners of the CUDA objects host code holds (streams, events, device memory,
// page-locked host memory, the current device).
//
//   CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, n, kind, stream));
//   NCCL_RETURN_IF_ERROR(ncclGroupEnd());
//   CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(...));
//   CUDNN_RETURN_IF_ERROR(cudnnConvolutionForward(...));
//
// A failed call returns from the calling function with a Status whose message
// names the API's error (name, number and description), the expression, and
// the file:line of the call, e.g.
//   "cudaMalloc(&p, bytes) at engine/core/cuda_status.cc:120:
//    cudaErrorMemoryAllocation (2): out of memory"
//
// Status codes, chosen so that the caller knows what to do:
//   RESOURCE_EXHAUSTED  out of device/host memory (cudaErrorMemoryAllocation,
//                       CUBLAS_STATUS_ALLOC_FAILED, cuDNN allocation failures)
//   FAILED_PRECONDITION no device, no/insufficient driver, an invalid device
//                       ordinal, an unsupported architecture (fix the machine
//                       or the configuration first)
//   UNAVAILABLE         ncclRemoteError / ncclSystemError (a peer or the network
//                       went away), cudaErrorDevicesUnavailable (device busy)
//   INTERNAL            everything else (bugs, sticky kernel faults)
//
// The thread's last-error slot: every kernel launcher returns
// cudaGetLastError(), so a runtime call that fails but whose failure is
// handled must not leave its error there for the next launch to report. The
// polls below (CudaStream::Done, CudaEvent::Done, and every other
// cudaStreamQuery/cudaEventQuery in this code base) clear it when they answer
// "not ready" (cudaErrorNotReady), as PyTorch does after its queries.
//
// Only code compiled with the CUDA toolkit includes this header (cuda_cc_library).

#include <cublas_api.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::engine {

// The absl code for each library's result (see the table above); success maps
// to kOk. ncclInProgress maps to kInternal: where it is expected, the caller
// tests for it before asking for a Status.
absl::StatusCode CudaErrorCode(cudaError_t error);
absl::StatusCode NcclErrorCode(ncclResult_t result);
absl::StatusCode CublasErrorCode(cublasStatus_t status);
absl::StatusCode CudnnErrorCode(cudnnStatus_t status);

// The Status for a failed call of `expr` at file:line (OkStatus on success).
// NcclStatus appends ncclGetLastError()'s detail and CudnnStatus
// cudnnGetLastErrorString()'s, when they have one.
absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line);
absl::Status NcclStatus(ncclResult_t result, const char* expr, const char* file, int line);
absl::Status CublasStatus(cublasStatus_t status, const char* expr, const char* file, int line);
absl::Status CudnnStatus(cudnnStatus_t status, const char* expr, const char* file, int line);

}  // namespace ringmaster::engine

// The Status of one call, without returning (for destructors, logging, tests).
#define CUDA_STATUS(expr) ::ringmaster::engine::CudaStatus((expr), #expr, __FILE__, __LINE__)
#define NCCL_STATUS(expr) ::ringmaster::engine::NcclStatus((expr), #expr, __FILE__, __LINE__)
#define CUBLAS_STATUS(expr) ::ringmaster::engine::CublasStatus((expr), #expr, __FILE__, __LINE__)
#define CUDNN_STATUS(expr) ::ringmaster::engine::CudnnStatus((expr), #expr, __FILE__, __LINE__)

// `text` is the expression as written (stringified before macro expansion).
#define RM_GPU_RETURN_IF_ERROR_(type, ok, fn, expr, text)                \
  do {                                                                   \
    type rm_gpu_result_ = (expr);                                        \
    if (rm_gpu_result_ != (ok)) {                                        \
      return ::ringmaster::engine::fn(rm_gpu_result_, text, __FILE__, __LINE__); \
    }                                                                    \
  } while (0)

// Evaluates `expr`; returns the Status of its failure from the calling function.
#define CUDA_RETURN_IF_ERROR(expr) \
  RM_GPU_RETURN_IF_ERROR_(cudaError_t, cudaSuccess, CudaStatus, expr, #expr)
#define CUBLAS_RETURN_IF_ERROR(expr) \
  RM_GPU_RETURN_IF_ERROR_(cublasStatus_t, CUBLAS_STATUS_SUCCESS, CublasStatus, expr, #expr)
#define CUDNN_RETURN_IF_ERROR(expr) \
  RM_GPU_RETURN_IF_ERROR_(cudnnStatus_t, CUDNN_STATUS_SUCCESS, CudnnStatus, expr, #expr)
// ncclInProgress is an error here (INTERNAL); calls on a non-blocking
// communicator use NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS and then wait for the
// communicator to leave ncclInProgress (ncclCommGetAsyncError).
#define NCCL_RETURN_IF_ERROR(expr) \
  RM_GPU_RETURN_IF_ERROR_(ncclResult_t, ncclSuccess, NcclStatus, expr, #expr)
#define NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(expr)                                        \
  do {                                                                                   \
    ncclResult_t rm_nccl_result_ = (expr);                                               \
    if (rm_nccl_result_ != ncclSuccess && rm_nccl_result_ != ncclInProgress) {           \
      return ::ringmaster::engine::NcclStatus(rm_nccl_result_, #expr, __FILE__, __LINE__); \
    }                                                                                    \
  } while (0)

namespace ringmaster::engine {

// Makes `device` the calling thread's current device and restores the previous
// one when destroyed. Not thread-safe (it is about the calling thread).
class ScopedDevice {
 public:
  static absl::StatusOr<ScopedDevice> Enter(int device);
  ScopedDevice(ScopedDevice&& other) noexcept : previous_(std::exchange(other.previous_, -1)) {}
  ScopedDevice& operator=(ScopedDevice&&) = delete;
  ScopedDevice(const ScopedDevice&) = delete;
  ~ScopedDevice();

 private:
  explicit ScopedDevice(int previous) : previous_(previous) {}
  int previous_;  // -1: nothing to restore
};

// Owns a cudaStream_t (non-blocking with respect to the legacy default stream).
// Movable, not copyable; not thread-safe.
class CudaStream {
 public:
  CudaStream() = default;
  // A stream on the current device.
  static absl::StatusOr<CudaStream> Create();
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() { Reset(); }

  cudaStream_t get() const { return stream_; }
  // Blocks until all work on the stream is done.
  absl::Status Synchronize() const;
  // True when all work is done, false while some is pending (the "not ready"
  // answer is cleared from the thread's last error: see the top of this file).
  absl::StatusOr<bool> Done() const;

 private:
  void Reset();
  cudaStream_t stream_ = nullptr;
};

// Owns a cudaEvent_t (timing disabled unless asked for). Movable; not thread-safe.
class CudaEvent {
 public:
  CudaEvent() = default;
  static absl::StatusOr<CudaEvent> Create(bool timing = false);
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() { Reset(); }

  cudaEvent_t get() const { return event_; }
  absl::Status Record(cudaStream_t stream) const;
  // True once the work recorded before it is done, false before (the "not
  // ready" answer is cleared from the thread's last error, as for CudaStream).
  absl::StatusOr<bool> Done() const;
  absl::Status Synchronize() const;

 private:
  void Reset();
  cudaEvent_t event_ = nullptr;
};

// Whether `stream` is being captured into a CUDA graph (cudaStreamIsCapturing).
// Code that would allocate, free, or copy from pageable memory asks this first
// and refuses (FAILED_PRECONDITION) instead of invalidating the capture.
absl::StatusOr<bool> StreamIsCapturing(cudaStream_t stream);

// Owns `bytes` of device memory on the device current at Allocate (cudaMalloc /
// cudaFree). Movable; not thread-safe. The engine's tensors use the backend's
// caching allocator; this is for buffers that live as long as their owner
// (communication staging, workspaces, tests). The owner must not destroy it
// while work enqueued on some stream may still use it.
//
// Copies are stream-ordered: they are enqueued on the stream the caller names,
// the one whose work uses the buffer. The engine's compute and communication
// streams are non-blocking: they do not wait for the legacy default stream, so
// a copy meant for them goes on them, or is waited for (CopyFromHost).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  // Enqueues a copy of `bytes` (<= this->bytes(); INVALID_ARGUMENT otherwise)
  // from host `src` on `stream`: work enqueued on `stream` after it reads the
  // data; work on other streams must wait for `stream` first. `src` must stay
  // alive and unchanged until `stream` has passed the copy (an event recorded
  // after it, or a synchronisation). It should be page-locked (PinnedBuffer):
  // then the copy is a true asynchronous DMA (the driver copies a pageable
  // source into its own staging before returning, and a graph capture cannot
  // record it).
  absl::Status CopyFromHostAsync(const void* src, size_t bytes, cudaStream_t stream);
  // The same, then waits for `stream`: when this returns, the data is on the
  // device for work on any stream, and `src` may change. For one-off copies
  // off the step path (initialisation, tests).
  absl::Status CopyFromHost(const void* src, size_t bytes, cudaStream_t stream);
  // Enqueues the copy to host `dst` on `stream`, after the work enqueued there
  // before, and waits for it: `dst` holds the data when this returns.
  absl::Status CopyToHost(void* dst, size_t bytes, cudaStream_t stream) const;

 private:
  void Reset();
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Owns `bytes` of page-locked host memory (cudaHostAlloc / cudaFreeHost), the
// staging from which host-to-device copies are truly asynchronous. Movable;
// not thread-safe. The owner must keep it alive and unchanged until the
// device has read what was copied from it (an event, or a synchronisation).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes);
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { Reset(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void Reset();
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CORE_CUDA_STATUS_H_
