#include "engine/core/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

absl::Status MakeStatus(absl::StatusCode code, const char* expr, const char* file, int line,
                        const std::string& error) {
  return absl::Status(code, absl::StrFormat("%s at %s:%d: %s", expr, file, line, error));
}

const char* NcclResultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclUnknownResult";
  }
}

// Logs a failure that a destructor cannot return.
void LogIfError(const absl::Status& status) {
  if (!status.ok()) spdlog::warn("{}", status.ToString());
}

}  // namespace

absl::StatusCode CudaErrorCode(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return absl::StatusCode::kOk;
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      return absl::StatusCode::kFailedPrecondition;
    case cudaErrorDevicesUnavailable:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode NcclErrorCode(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return absl::StatusCode::kOk;
    case ncclRemoteError:
    case ncclSystemError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode CublasErrorCode(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return absl::StatusCode::kOk;
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::StatusCode::kResourceExhausted;
    case CUBLAS_STATUS_NOT_INITIALIZED:  // the CUDA runtime could not start: no device or driver
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode CudnnErrorCode(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS:
      return absl::StatusCode::kOk;
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return absl::StatusCode::kResourceExhausted;
    case CUDNN_STATUS_NOT_INITIALIZED:  // cudnnCreate found no usable device
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED:
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return MakeStatus(CudaErrorCode(error), expr, file, line,
                    absl::StrFormat("%s (%d): %s", cudaGetErrorName(error), static_cast<int>(error),
                                    cudaGetErrorString(error)));
}

absl::Status NcclStatus(ncclResult_t result, const char* expr, const char* file, int line) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string error = absl::StrFormat("%s (%d): %s", NcclResultName(result), static_cast<int>(result),
                                      ncclGetErrorString(result));
  // The detail of the calling thread's last NCCL failure, if NCCL kept one.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') absl::StrAppend(&error, "; last NCCL error: ", last);
  return MakeStatus(NcclErrorCode(result), expr, file, line, error);
}

absl::Status CublasStatus(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return MakeStatus(CublasErrorCode(status), expr, file, line,
                    absl::StrFormat("%s (%d): %s", cublasGetStatusName(status), static_cast<int>(status),
                                    cublasGetStatusString(status)));
}

absl::Status CudnnStatus(cudnnStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  std::string error = absl::StrFormat("%s (%d)", cudnnGetErrorString(status), static_cast<int>(status));
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0] != '\0') absl::StrAppend(&error, ": ", detail);
  return MakeStatus(CudnnErrorCode(status), expr, file, line, error);
}

// ---------------------------------------------------------------- ScopedDevice

absl::StatusOr<ScopedDevice> ScopedDevice::Enter(int device) {
  int previous = -1;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  if (previous != device) CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  return ScopedDevice(previous == device ? -1 : previous);
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) LogIfError(CUDA_STATUS(cudaSetDevice(previous_)));
}

// ------------------------------------------------------------------ CudaStream

absl::StatusOr<CudaStream> CudaStream::Create() {
  CudaStream stream;
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream.stream_, cudaStreamNonBlocking));
  return stream;
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void CudaStream::Reset() {
  if (stream_ != nullptr) LogIfError(CUDA_STATUS(cudaStreamDestroy(stream_)));
  stream_ = nullptr;
}

absl::Status CudaStream::Synchronize() const {
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<bool> CudaStream::Done() const {
  cudaError_t error = cudaStreamQuery(stream_);
  if (error == cudaErrorNotReady) {
    (void)cudaGetLastError();  // an answer, not a failure: the next launch must not report it
    return false;
  }
  CUDA_RETURN_IF_ERROR(error);
  return true;
}

// ------------------------------------------------------------------- CudaEvent

absl::StatusOr<CudaEvent> CudaEvent::Create(bool timing) {
  CudaEvent event;
  CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event.event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  return event;
}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    Reset();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CudaEvent::Reset() {
  if (event_ != nullptr) LogIfError(CUDA_STATUS(cudaEventDestroy(event_)));
  event_ = nullptr;
}

absl::Status CudaEvent::Record(cudaStream_t stream) const {
  CUDA_RETURN_IF_ERROR(cudaEventRecord(event_, stream));
  return absl::OkStatus();
}

absl::StatusOr<bool> CudaEvent::Done() const {
  cudaError_t error = cudaEventQuery(event_);
  if (error == cudaErrorNotReady) {
    (void)cudaGetLastError();  // an answer, not a failure: the next launch must not report it
    return false;
  }
  CUDA_RETURN_IF_ERROR(error);
  return true;
}

absl::Status CudaEvent::Synchronize() const {
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_));
  return absl::OkStatus();
}

// ------------------------------------------------------------------- Capture

absl::StatusOr<bool> StreamIsCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
  return capture != cudaStreamCaptureStatusNone;
}

// ---------------------------------------------------------------- DeviceBuffer

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  CUDA_RETURN_IF_ERROR(cudaMalloc(&buffer.data_, bytes));
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (data_ != nullptr) LogIfError(CUDA_STATUS(cudaFree(data_)));
  data_ = nullptr;
  bytes_ = 0;
}

absl::Status DeviceBuffer::CopyFromHostAsync(const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes > bytes_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("copying %d bytes into a device buffer of %d bytes", bytes, bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(data_, src, bytes, cudaMemcpyHostToDevice, stream));
  return absl::OkStatus();
}

absl::Status DeviceBuffer::CopyFromHost(const void* src, size_t bytes, cudaStream_t stream) {
  absl::Status enqueued = CopyFromHostAsync(src, bytes, stream);
  if (!enqueued.ok() || bytes == 0) return enqueued;
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status DeviceBuffer::CopyToHost(void* dst, size_t bytes, cudaStream_t stream) const {
  if (bytes > bytes_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("copying %d bytes out of a device buffer of %d bytes", bytes, bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, data_, bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- PinnedBuffer

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  CUDA_RETURN_IF_ERROR(cudaHostAlloc(&buffer.data_, bytes, cudaHostAllocDefault));
  buffer.bytes_ = bytes;
  return buffer;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void PinnedBuffer::Reset() {
  if (data_ != nullptr) LogIfError(CUDA_STATUS(cudaFreeHost(data_)));
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace ringmaster::engine
