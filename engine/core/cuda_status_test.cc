// The status macros on real failing calls (which fail on every machine, with
// or without a device) and on each library's codes; the RAII owners' error
// paths without a device and their normal use with one: stream-ordered copies,
// the capture query, and polls of pending work that leave no error behind.
#include "engine/core/cuda_status.h"

#include <cublasLt.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ringmaster::engine {
namespace {

constexpr char kFile[] = "engine/core/cuda_status_test.cc";

bool HaveDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// ------------------------------------------------------------------------ CUDA

TEST(CudaStatusTest, CodesTellTheCallerWhatToDo) {
  EXPECT_EQ(CudaErrorCode(cudaSuccess), absl::StatusCode::kOk);
  EXPECT_EQ(CudaErrorCode(cudaErrorMemoryAllocation), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaErrorCode(cudaErrorNoDevice), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorInsufficientDriver), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorInvalidDevice), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorNoKernelImageForDevice), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorDevicesUnavailable), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaErrorCode(cudaErrorIllegalAddress), absl::StatusCode::kInternal);
  EXPECT_EQ(CudaErrorCode(cudaErrorInvalidValue), absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, MessageNamesExpressionPlaceAndError) {
  absl::Status status = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, 16)", "x.cc", 7);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "cudaMalloc(&p, 16) at x.cc:7: cudaErrorMemoryAllocation (2): out of memory");
  EXPECT_TRUE(CudaStatus(cudaSuccess, "f()", "x.cc", 1).ok());
}

int set_device_line = 0;
absl::Status SetInvalidDevice() {
  set_device_line = __LINE__ + 1;
  CUDA_RETURN_IF_ERROR(cudaSetDevice(-1));
  return absl::OkStatus();
}

TEST(CudaStatusTest, MacroReturnsTheFailureOfARealCall) {
  // No driver: cudaErrorInsufficientDriver; no device: cudaErrorNoDevice;
  // a device: cudaErrorInvalidDevice. All are FAILED_PRECONDITION.
  const cudaError_t expected = cudaSetDevice(-1);
  ASSERT_NE(expected, cudaSuccess);
  absl::Status status = SetInvalidDevice();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), absl::StrCat("cudaSetDevice(-1) at ", kFile, ":", set_device_line, ": ",
                                           cudaGetErrorName(expected), " (", static_cast<int>(expected),
                                           "): ", cudaGetErrorString(expected)));
}

absl::Status CountedSuccess(int* calls) {
  CUDA_RETURN_IF_ERROR(((*calls)++, cudaSuccess));
  CUBLAS_RETURN_IF_ERROR(((*calls)++, CUBLAS_STATUS_SUCCESS));
  CUDNN_RETURN_IF_ERROR(((*calls)++, CUDNN_STATUS_SUCCESS));
  NCCL_RETURN_IF_ERROR(((*calls)++, ncclSuccess));
  NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(((*calls)++, ncclInProgress));
  return absl::OkStatus();
}

TEST(CudaStatusTest, SuccessPassesAndEachExpressionRunsOnce) {
  int calls = 0;
  EXPECT_TRUE(CountedSuccess(&calls).ok());
  EXPECT_EQ(calls, 5);
}

// ------------------------------------------------------------------------ NCCL

TEST(NcclStatusTest, LostPeersAreUnavailableAndTheRestInternal) {
  EXPECT_EQ(NcclErrorCode(ncclSuccess), absl::StatusCode::kOk);
  EXPECT_EQ(NcclErrorCode(ncclRemoteError), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclErrorCode(ncclSystemError), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclErrorCode(ncclUnhandledCudaError), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclErrorCode(ncclInternalError), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclErrorCode(ncclInvalidArgument), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclErrorCode(ncclInvalidUsage), absl::StatusCode::kInternal);
  EXPECT_EQ(NcclErrorCode(ncclInProgress), absl::StatusCode::kInternal);
}

TEST(NcclStatusTest, MessageCarriesNcclsErrorString) {
  absl::Status status = NcclStatus(ncclRemoteError, "ncclAllReduce(...)", "x.cc", 9);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StartsWith(status.message(),
                               "ncclAllReduce(...) at x.cc:9: ncclRemoteError (6): remote process exited "
                               "or there was a network error"))
      << status;
  EXPECT_TRUE(NcclStatus(ncclSuccess, "f()", "x.cc", 1).ok());
}

int async_error_line = 0;
absl::Status AsyncErrorOfNoComm() {
  ncclResult_t state = ncclSuccess;
  async_error_line = __LINE__ + 1;
  NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(nullptr, &state));
  return absl::OkStatus();
}

TEST(NcclStatusTest, MacroReturnsARealFailureWithNcclsDetail) {
  absl::Status status = AsyncErrorOfNoComm();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(),
            absl::StrCat("ncclCommGetAsyncError(nullptr, &state) at ", kFile, ":", async_error_line,
                         ": ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details)"
                         "; last NCCL error: ncclGetAsyncError : comm argument is NULL"));
}

absl::Status InProgress(bool tolerate) {
  if (tolerate) {
    NCCL_RETURN_IF_ERROR_OR_IN_PROGRESS(ncclInProgress);
  } else {
    NCCL_RETURN_IF_ERROR(ncclInProgress);
  }
  return absl::OkStatus();
}

TEST(NcclStatusTest, InProgressIsAnErrorOnlyWhereItIsNotExpected) {
  EXPECT_TRUE(InProgress(true).ok());
  absl::Status status = InProgress(false);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(status.message(), "ncclInProgress (7): NCCL operation in progress")) << status;
}

// ---------------------------------------------------------------------- cuBLAS

TEST(CublasStatusTest, Codes) {
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_SUCCESS), absl::StatusCode::kOk);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_ALLOC_FAILED), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_NOT_INITIALIZED), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_ARCH_MISMATCH), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_INVALID_VALUE), absl::StatusCode::kInternal);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_EXECUTION_FAILED), absl::StatusCode::kInternal);
  absl::Status status = CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtMatmul(...)", "x.cc", 3);
  EXPECT_EQ(status.message(),
            "cublasLtMatmul(...) at x.cc:3: CUBLAS_STATUS_ALLOC_FAILED (3): the resource allocation failed");
}

int lt_create_line = 0;
absl::Status CreateLt(cublasLtHandle_t* handle) {
  lt_create_line = __LINE__ + 1;
  CUBLAS_RETURN_IF_ERROR(cublasLtCreate(handle));
  return absl::OkStatus();
}

TEST(CublasStatusTest, HandleCreationWithoutADeviceIsAFailedPrecondition) {
  cublasLtHandle_t handle = nullptr;
  absl::Status status = CreateLt(&handle);
  if (HaveDevice()) {
    ASSERT_TRUE(status.ok()) << status;
    cublasLtDestroy(handle);
    GTEST_SKIP() << "a CUDA device is present: cublasLtCreate succeeds";
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), absl::StrCat("cublasLtCreate(handle) at ", kFile, ":", lt_create_line,
                                           ": CUBLAS_STATUS_NOT_INITIALIZED (1): the library was not "
                                           "initialized"));
}

// ----------------------------------------------------------------------- cuDNN

TEST(CudnnStatusTest, Codes) {
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_SUCCESS), absl::StatusCode::kOk);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_NOT_INITIALIZED), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_BAD_PARAM), absl::StatusCode::kInternal);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_EXECUTION_FAILED), absl::StatusCode::kInternal);
}

int set_descriptor_line = 0;
absl::Status SetNegativeBatch(cudnnTensorDescriptor_t desc) {
  set_descriptor_line = __LINE__ + 1;
  CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, -1, 1, 1, 1));
  return absl::OkStatus();
}

TEST(CudnnStatusTest, MacroReturnsARealFailureWithCudnnsDetail) {
  cudnnTensorDescriptor_t desc = nullptr;
  ASSERT_EQ(cudnnCreateTensorDescriptor(&desc), CUDNN_STATUS_SUCCESS);  // needs no device
  absl::Status status = SetNegativeBatch(desc);
  cudnnDestroyTensorDescriptor(desc);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StartsWith(
      status.message(),
      absl::StrCat("cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, -1, 1, 1, 1) at ",
                   kFile, ":", set_descriptor_line, ": CUDNN_STATUS_BAD_PARAM (2000): ")))
      << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "(n <= 0)")) << status;
}

// ------------------------------------------------------------------------ RAII

TEST(CudaRaiiTest, EmptyOwnersAreSafe) {
  CudaStream stream;
  CudaEvent event;
  DeviceBuffer buffer;
  EXPECT_EQ(stream.get(), nullptr);
  EXPECT_EQ(event.get(), nullptr);
  EXPECT_EQ(buffer.data(), nullptr);
  absl::StatusOr<DeviceBuffer> empty = DeviceBuffer::Allocate(0);  // no CUDA call
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->bytes(), 0u);
  float value = 1.0f;
  absl::Status status = empty->CopyFromHost(&value, sizeof value, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "copying 4 bytes into a device buffer of 0 bytes");
  EXPECT_EQ(empty->CopyFromHostAsync(&value, sizeof value, nullptr).code(), absl::StatusCode::kInvalidArgument);
  status = empty->CopyToHost(&value, sizeof value, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "copying 4 bytes out of a device buffer of 0 bytes");
  PinnedBuffer pinned;
  EXPECT_EQ(pinned.data(), nullptr);
  absl::StatusOr<PinnedBuffer> no_pinned = PinnedBuffer::Allocate(0);  // no CUDA call
  ASSERT_TRUE(no_pinned.ok()) << no_pinned.status();
  EXPECT_EQ(no_pinned->bytes(), 0u);
}

TEST(CudaRaiiTest, WithoutADeviceCreationFailsAsAFailedPrecondition) {
  if (HaveDevice()) GTEST_SKIP() << "a CUDA device is present: creation succeeds (see OnDevice tests)";
  absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Allocate(16);
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(buffer.status().message(),
                               "cudaMalloc(&buffer.data_, bytes) at engine/core/cuda_status.cc:"))
      << buffer.status();
  EXPECT_EQ(CudaStream::Create().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaEvent::Create().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ScopedDevice::Enter(0).status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<PinnedBuffer> pinned = PinnedBuffer::Allocate(16);
  EXPECT_EQ(pinned.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(pinned.status().message(),
                               "cudaHostAlloc(&buffer.data_, bytes, cudaHostAllocDefault) at "
                               "engine/core/cuda_status.cc:"))
      << pinned.status();
  EXPECT_EQ(StreamIsCapturing(nullptr).status().code(), absl::StatusCode::kFailedPrecondition);
  (void)cudaGetLastError();  // the failures above are reported; clear them
}

TEST(CudaRaiiTest, OnDeviceBufferRoundTripsAndMoves) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: device memory not exercised";
  std::vector<float> in = {1, 2, 3, 4}, out(4, 0);
  absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Allocate(in.size() * sizeof(float));
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(buffer->CopyFromHost(in.data(), in.size() * sizeof(float), nullptr).ok());
  DeviceBuffer moved = std::move(*buffer);
  EXPECT_EQ(buffer->data(), nullptr);
  ASSERT_TRUE(moved.CopyToHost(out.data(), out.size() * sizeof(float), nullptr).ok());
  EXPECT_EQ(out, in);
}

// A copy from pinned staging on a non-blocking stream, then a device-to-device
// copy and the read-back on the same stream: ordered without any host wait.
TEST(CudaRaiiTest, OnDeviceCopiesAreOrderedOnTheirStream) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: stream-ordered copies not exercised";
  constexpr size_t kFloats = 1 << 20;
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<PinnedBuffer> staging = PinnedBuffer::Allocate(kFloats * sizeof(float));
  ASSERT_TRUE(staging.ok()) << staging.status();
  float* host = static_cast<float*>(staging->data());
  for (size_t i = 0; i < kFloats; ++i) host[i] = static_cast<float>(i % 977);
  absl::StatusOr<DeviceBuffer> a = DeviceBuffer::Allocate(kFloats * sizeof(float));
  absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(kFloats * sizeof(float));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->CopyFromHostAsync(host, kFloats * sizeof(float), stream->get()).ok());
  ASSERT_EQ(cudaMemcpyAsync(b->data(), a->data(), kFloats * sizeof(float), cudaMemcpyDeviceToDevice, stream->get()),
            cudaSuccess);
  std::vector<float> out(kFloats, -1.0f);
  ASSERT_TRUE(b->CopyToHost(out.data(), kFloats * sizeof(float), stream->get()).ok());
  for (size_t i = 0; i < kFloats; ++i) ASSERT_EQ(out[i], static_cast<float>(i % 977)) << "at " << i;
}

TEST(CudaRaiiTest, OnDeviceStreamIsCapturingOnlyDuringACapture) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: graph capture not exercised";
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(*StreamIsCapturing(stream->get()), false);
  ASSERT_EQ(cudaStreamBeginCapture(stream->get(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
  absl::StatusOr<bool> capturing = StreamIsCapturing(stream->get());
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream->get(), &graph), cudaSuccess);
  ASSERT_TRUE(capturing.ok()) << capturing.status();
  EXPECT_TRUE(*capturing);
  if (graph != nullptr) cudaGraphDestroy(graph);
  EXPECT_EQ(*StreamIsCapturing(stream->get()), false);
}

// A poll that finds work pending answers false and leaves no error behind: the
// next launcher's cudaGetLastError() must not report cudaErrorNotReady (600).
// The stream is held back by a host function that waits for the test.
TEST(CudaRaiiTest, OnDeviceNotReadyPollsLeaveNoErrorForTheNextLaunch) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: pending work not exercised";
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<CudaEvent> event = CudaEvent::Create();
  ASSERT_TRUE(event.ok()) << event.status();
  std::atomic<bool> release{false};
  struct ReleaseOnExit {  // an early ASSERT must not leave the stream held
    std::atomic<bool>& flag;
    ~ReleaseOnExit() { flag = true; }
  } release_on_exit{release};
  auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  };
  ASSERT_EQ(cudaLaunchHostFunc(stream->get(), hold, &release), cudaSuccess);
  ASSERT_TRUE(event->Record(stream->get()).ok());

  absl::StatusOr<bool> stream_done = stream->Done();
  const cudaError_t after_stream_poll = cudaPeekAtLastError();
  absl::StatusOr<bool> event_done = event->Done();
  const cudaError_t after_event_poll = cudaGetLastError();
  release = true;
  ASSERT_TRUE(stream->Synchronize().ok());

  ASSERT_TRUE(stream_done.ok()) << stream_done.status();
  EXPECT_FALSE(*stream_done);
  EXPECT_EQ(after_stream_poll, cudaSuccess) << cudaGetErrorName(after_stream_poll);
  ASSERT_TRUE(event_done.ok()) << event_done.status();
  EXPECT_FALSE(*event_done);
  EXPECT_EQ(after_event_poll, cudaSuccess) << cudaGetErrorName(after_event_poll);
  EXPECT_EQ(*stream->Done(), true);
  EXPECT_EQ(*event->Done(), true);
}

TEST(CudaRaiiTest, OnDeviceOutOfMemoryIsResourceExhausted) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: device memory not exercised";
  absl::StatusOr<DeviceBuffer> huge = DeviceBuffer::Allocate(size_t{1} << 50);  // 1 PiB
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(huge.status().message(), "cudaErrorMemoryAllocation (2): out of memory"))
      << huge.status();
  // Not sticky: the device still works.
  EXPECT_TRUE(DeviceBuffer::Allocate(64).ok());
}

TEST(CudaRaiiTest, OnDeviceStreamAndEventTrackWork) {
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device present: streams not exercised";
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<CudaEvent> event = CudaEvent::Create();
  ASSERT_TRUE(event.ok()) << event.status();
  absl::StatusOr<DeviceBuffer> buffer = DeviceBuffer::Allocate(1 << 20);
  ASSERT_TRUE(buffer.ok());
  ASSERT_EQ(cudaMemsetAsync(buffer->data(), 0, buffer->bytes(), stream->get()), cudaSuccess);
  ASSERT_TRUE(event->Record(stream->get()).ok());
  ASSERT_TRUE(event->Synchronize().ok());
  EXPECT_EQ(*event->Done(), true);
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(*stream->Done(), true);
}

TEST(CudaRaiiTest, OnDeviceScopedDeviceRestoresThePrevious) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
    GTEST_SKIP() << "fewer than 2 CUDA devices: device switching not exercised";
  }
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  {
    absl::StatusOr<ScopedDevice> scoped = ScopedDevice::Enter(0);
    ASSERT_TRUE(scoped.ok()) << scoped.status();
    int current = -1;
    cudaGetDevice(&current);
    EXPECT_EQ(current, 0);
  }
  int current = -1;
  cudaGetDevice(&current);
  EXPECT_EQ(current, 1);
}

}  // namespace
}  // namespace ringmaster::engine
