// CudaBackend: construction, memory, elementwise ops and Synchronize.

#include "engine/cuda/cuda_backend.h"

#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/elementwise.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {

static_assert(static_cast<int>(DType::kF32) == static_cast<int>(kernels::FloatType::kF32) &&
                  static_cast<int>(DType::kF16) == static_cast<int>(kernels::FloatType::kF16) &&
                  static_cast<int>(DType::kBF16) == static_cast<int>(kernels::FloatType::kBF16),
              "kernels::FloatType mirrors DType");

namespace {

class CudaRawAllocator : public RawDeviceAllocator {
 public:
  explicit CudaRawAllocator(int device) : device_(device) {}
  absl::StatusOr<void*> Malloc(size_t bytes) override {
    void* p = nullptr;
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const cudaError_t error = cudaMalloc(&p, bytes);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();  // out of memory is not sticky: do not let a later launch report it
      return CudaStatus(error, "cudaMalloc(&p, bytes)", __FILE__, __LINE__);
    }
    return p;
  }
  void Free(void* ptr) override {
    absl::Status status = CUDA_STATUS(cudaFree(ptr));
    if (!status.ok()) spdlog::warn("{}", status.ToString());
  }

 private:
  int device_;
};

}  // namespace

// ----------------------------------------------------------------- Impl

CudaBackend::Impl::~Impl() {
  // Work still queued may use the handles and the workspace.
  if (stream.get() != nullptr) (void)stream.Synchronize();
  sdpa.reset();  // its plans hold the cuDNN handle
  if (gemm_workspace != nullptr) allocator->Free(gemm_workspace);
  if (cublaslt != nullptr) cublasLtDestroy(cublaslt);
  if (cudnn != nullptr) cudnnDestroy(cudnn);
}

absl::Status CudaBackend::Impl::EnterDevice() const {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(config.device));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> CudaBackend::Impl::NewTensor(const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  absl::StatusOr<void*> ptr = allocator->Allocate(bytes, stream_key());
  if (!ptr.ok()) return ptr.status();
  std::shared_ptr<CachingAllocator> owner = allocator;
  auto storage = std::make_shared<Storage>(*ptr, bytes, Device::kCuda, [owner](void* p) { owner->Free(p); });
  return Tensor(std::move(storage), shape, dtype);
}

absl::StatusOr<Tensor> CudaBackend::Impl::Scratch(int64_t floats) {
  return NewTensor({floats > 0 ? floats : 1}, DType::kF32);
}

// ------------------------------------------------------------ construction

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendConfig& config) {
  if (config.compute_dtype == DType::kI32) {
    return absl::InvalidArgumentError("CudaBackend: i32 is not a compute dtype (use f32, f16 or bf16)");
  }
  int devices = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&devices);
  if (count_error != cudaSuccess || devices == 0) {
    return absl::FailedPreconditionError(
        "CudaBackend: no usable CUDA device (" +
        std::string(count_error != cudaSuccess ? cudaGetErrorString(count_error) : "cudaGetDeviceCount found 0") +
        "); run on a machine with an NVIDIA GPU and driver, or use the CPU backend");
  }
  if (config.device < 0 || config.device >= devices) {
    return absl::FailedPreconditionError("CudaBackend: device " + std::to_string(config.device) + " of " +
                                         std::to_string(devices) + " does not exist");
  }
  CUDA_RETURN_IF_ERROR(cudaSetDevice(config.device));
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  if (!stream.ok()) return stream.status();
  impl->stream = std::move(*stream);
  impl->allocator = std::make_shared<CachingAllocator>(std::make_unique<CudaRawAllocator>(config.device));
  CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&impl->cublaslt));
  CUDNN_RETURN_IF_ERROR(cudnnCreate(&impl->cudnn));
  CUDNN_RETURN_IF_ERROR(cudnnSetStream(impl->cudnn, impl->stream.get()));
  absl::StatusOr<void*> workspace = impl->allocator->Allocate(Impl::kGemmWorkspaceBytes, impl->stream_key());
  if (!workspace.ok()) return workspace.status();
  impl->gemm_workspace = *workspace;
  return std::unique_ptr<CudaBackend>(new CudaBackend(config, std::move(impl)));
}

CudaBackend::CudaBackend(const CudaBackendConfig& config, std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)), config_(config) {}

CudaBackend::~CudaBackend() = default;

cudaStream_t CudaBackend::compute_stream() const { return impl_->stream.get(); }
CachingAllocator& CudaBackend::allocator() { return *impl_->allocator; }

absl::Status CudaBackend::Synchronize() {
  absl::Status sync = impl_->stream.Synchronize();
  // A failed runtime call also sets the thread's last error; the failure is
  // reported here, so clear it (launchers read cudaGetLastError()).
  (void)cudaGetLastError();
  absl::Status first = std::move(impl_->error);
  impl_->error = absl::OkStatus();
  return first.ok() ? sync : first;
}

// ------------------------------------------------------------------ memory

Tensor CudaBackend::Empty(const Shape& shape, DType dtype) {
  absl::StatusOr<Tensor> t = impl_->NewTensor(shape, dtype);
  if (t.ok()) return *std::move(t);
  // Ops are void: keep the failure for Synchronize and hand out a tensor
  // without memory; every later op is a no-op until then.
  if (impl_->error.ok()) impl_->error = t.status();
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  return Tensor(std::make_shared<Storage>(nullptr, bytes, Device::kCuda, nullptr), shape, dtype);
}

Tensor CudaBackend::Zeros(const Shape& shape, DType dtype) {
  Tensor t = Empty(shape, dtype);
  RM_CUDA_OP(cudaMemsetAsync(t.raw(), 0, t.bytes(), compute_stream()));
  return t;
}

void CudaBackend::CopyFromHost(const Tensor& host_src, const Tensor& dst) {
  ENGINE_CHECK(host_src.device() == Device::kCpu && dst.device() == Device::kCuda, "CopyFromHost devices");
  ENGINE_CHECK(host_src.dtype() == dst.dtype() && host_src.numel() == dst.numel(), "CopyFromHost {} -> {}",
               ShapeString(host_src.shape()), ShapeString(dst.shape()));
  RM_CUDA_OP(cudaMemcpyAsync(dst.raw(), host_src.raw(), dst.bytes(), cudaMemcpyHostToDevice, compute_stream()));
}

void CudaBackend::CopyToHost(const Tensor& src, const Tensor& host_dst) {
  ENGINE_CHECK(src.device() == Device::kCuda && host_dst.device() == Device::kCpu, "CopyToHost devices");
  ENGINE_CHECK(src.dtype() == host_dst.dtype() && src.numel() == host_dst.numel(), "CopyToHost {} -> {}",
               ShapeString(src.shape()), ShapeString(host_dst.shape()));
  impl_->Run([&] {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host_dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToHost, compute_stream()));
    return impl_->stream.Synchronize();
  });
}

void CudaBackend::Copy(const Tensor& src, const Tensor& dst) {
  ENGINE_CHECK(src.device() == Device::kCuda && dst.device() == Device::kCuda, "Copy of a host tensor");
  ENGINE_CHECK(src.dtype() == dst.dtype() && src.numel() == dst.numel(), "Copy {} -> {}", ShapeString(src.shape()),
               ShapeString(dst.shape()));
  if (src.raw() == dst.raw()) return;
  RM_CUDA_OP(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice, compute_stream()));
}

// ------------------------------------------------------------- elementwise

void CudaBackend::Fill(const Tensor& x, float value) {
  CheckDeviceF32(x, "Fill x");
  RM_CUDA_OP(kernels::LaunchFill(F32(x), x.numel(), value, compute_stream()));
}

void CudaBackend::Scale(const Tensor& x, float alpha) {
  CheckDeviceF32(x, "Scale x");
  RM_CUDA_OP(kernels::LaunchScale(F32(x), x.numel(), alpha, compute_stream()));
}

void CudaBackend::Axpy(float alpha, const Tensor& x, const Tensor& y) {
  CheckDeviceF32(x, "Axpy x");
  CheckDeviceF32(y, "Axpy y");
  CheckSameNumelCuda(x, y, "Axpy");
  RM_CUDA_OP(kernels::LaunchAxpy(alpha, F32(x), F32(y), x.numel(), compute_stream()));
}

void CudaBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  CheckDeviceAct(a, impl_->act_dtype(), "Add a");
  CheckDeviceAct(b, impl_->act_dtype(), "Add b");
  CheckDeviceAct(out, impl_->act_dtype(), "Add out");
  CheckSameNumelCuda(a, b, "Add");
  CheckSameNumelCuda(a, out, "Add");
  RM_CUDA_OP(kernels::LaunchAdd(a.raw(), b.raw(), out.raw(), a.numel(), impl_->act(), compute_stream()));
}

void CudaBackend::Convert(const Tensor& src, const Tensor& dst) {
  CheckSameNumelCuda(src, dst, "Convert");
  ENGINE_CHECK(src.device() == Device::kCuda && dst.device() == Device::kCuda, "Convert of a host tensor");
  ENGINE_CHECK(src.dtype() != DType::kI32 && dst.dtype() != DType::kI32, "Convert of i32");
  if (src.dtype() == dst.dtype()) {
    Copy(src, dst);
    return;
  }
  RM_CUDA_OP(kernels::LaunchConvert(src.raw(), AsFloatType(src.dtype()), dst.raw(), AsFloatType(dst.dtype()),
                                    src.numel(), compute_stream()));
}

void CudaBackend::RoundInPlace(const Tensor& x, DType dtype) {
  CheckDeviceF32(x, "RoundInPlace x");
  ENGINE_CHECK(dtype != DType::kI32, "RoundInPlace to i32");
  if (dtype == DType::kF32) return;
  RM_CUDA_OP(kernels::LaunchRound(F32(x), F32(x), x.numel(), AsFloatType(dtype), compute_stream()));
}

void CudaBackend::NonFiniteCheck(const std::vector<Tensor>& tensors, const Tensor& flag) {
  CheckDeviceF32(flag, "NonFiniteCheck flag");
  ENGINE_CHECK(flag.numel() == 1, "flag must have one element");
  for (const Tensor& t : tensors) CheckDeviceF32(t, "NonFiniteCheck tensor");
  impl_->Run([&] {
    for (const Tensor& t : tensors) {
      CUDA_RETURN_IF_ERROR(kernels::LaunchNonFiniteCheck(F32(t), t.numel(), F32(flag), compute_stream()));
    }
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::engine
