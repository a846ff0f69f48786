// CudaBackend: GEMM and batched GEMM through cuBLASLt, the bias gradient, and
// the GEMM with the bias + GELU epilogue (LinearGeluForward).
//
// Our tensors are row-major; cuBLASLt is column-major. A row-major [r, c]
// matrix is the column-major [c, r] one, so c = op(a) op(b) is computed as
// c^T = op(b)^T op(a)^T: cuBLASLt's A is our b, its B is our a, m and n swap,
// and the bias (one value per column of c) is a per-row bias of c^T, which is
// what CUBLASLT_EPILOGUE_BIAS adds.

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/reduce.h"

namespace ringmaster::engine {
namespace {

struct MatDims {
  int64_t rows, cols;
};

MatDims As2D(const Tensor& t) {
  ENGINE_CHECK(t.rank() >= 1, "GEMM operand of rank 0");
  const int64_t cols = t.dim(-1);
  return {cols == 0 ? 0 : t.numel() / cols, cols};
}

// Elements spanned by `batch` matrices of `rows` x `ld` spaced `stride` apart.
int64_t Extent(int64_t batch, int64_t stride, int64_t rows, int64_t ld) { return (batch - 1) * stride + rows * ld; }

// The GemmCall of Backend::Gemm's arguments, checked (a mismatch is a caller bug).
GemmCall GemmCallFor(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                     const Tensor& c, const Tensor* bias) {
  CheckDeviceF32(a, "Gemm a");
  CheckDeviceF32(b, "Gemm b");
  CheckDeviceF32(c, "Gemm c");
  const MatDims ad = As2D(a), bd = As2D(b);
  GemmCall g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = trans_a ? ad.cols : ad.rows;
  g.k = trans_a ? ad.rows : ad.cols;
  g.n = trans_b ? bd.rows : bd.cols;
  ENGINE_CHECK(g.k == (trans_b ? bd.cols : bd.rows), "Gemm inner dims: a {} (trans {}) b {} (trans {})",
               ShapeString(a.shape()), trans_a, ShapeString(b.shape()), trans_b);
  ENGINE_CHECK(c.numel() == g.m * g.n && (g.n == 0 || c.dim(-1) == g.n), "Gemm c {} for [{}, {}]",
               ShapeString(c.shape()), g.m, g.n);
  if (bias != nullptr) {
    CheckDeviceF32(*bias, "Gemm bias");
    ENGINE_CHECK(bias->numel() == g.n, "Gemm bias {} for N = {}", ShapeString(bias->shape()), g.n);
  }
  g.alpha = alpha;
  g.beta = beta;
  g.a = F32(a);
  g.lda = ad.cols;
  g.b = F32(b);
  g.ldb = bd.cols;
  g.c = F32(c);
  g.ldc = g.n;
  g.bias = bias != nullptr ? F32(*bias) : nullptr;
  return g;
}

}  // namespace

absl::Status CudaBackend::Impl::Gemm(const GemmCall& g) {
  if (g.m == 0 || g.n == 0) return absl::OkStatus();
  ENGINE_CHECK(g.gelu_aux == nullptr || (g.bias != nullptr && g.batch == 1 && g.beta == 0.0f && g.n % 8 == 0),
               "GELU epilogue GEMM needs a bias, batch 1, beta 0 and n % 8 == 0");
  const cudaStream_t s = stream.get();
  const kernels::FloatType rt = round();
  // Operands in the compute dtype: 16-bit copies (rounded) in scratch.
  const void* a = g.a;
  const void* b = g.b;
  Tensor a16, b16, bias_rounded, product;
  cudaDataType_t ab_type = CUDA_R_32F;
  cublasComputeType_t compute = config.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (mixed()) {
    ab_type = config.compute_dtype == DType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
    compute = CUBLAS_COMPUTE_32F;
    const int64_t na = Extent(g.batch, g.stride_a, g.trans_a ? g.k : g.m, g.lda);
    const int64_t nb = Extent(g.batch, g.stride_b, g.trans_b ? g.n : g.k, g.ldb);
    ASSIGN_OR_RETURN(a16, NewTensor({na}, config.compute_dtype));
    ASSIGN_OR_RETURN(b16, NewTensor({nb}, config.compute_dtype));
    CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(g.a, kernels::FloatType::kF32, a16.raw(), rt, na, s));
    CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(g.b, kernels::FloatType::kF32, b16.raw(), rt, nb, s));
    a = a16.raw();
    b = b16.raw();
  }
  const float* bias = g.bias;
  if (mixed() && bias != nullptr) {
    ASSIGN_OR_RETURN(bias_rounded, Scratch(g.n));
    CUDA_RETURN_IF_ERROR(kernels::LaunchRound(bias, F32(bias_rounded), g.n, rt, s));
    bias = F32(bias_rounded);
  }
  // With a 16-bit compute dtype and beta != 0 the product is rounded on its
  // own, then added: computed into scratch with beta = 0.
  float* d = g.c;
  float beta = g.beta;
  int64_t ldd = g.ldc, stride_d = g.stride_c;
  const bool separate = mixed() && g.beta != 0.0f;
  if (separate) {
    ASSIGN_OR_RETURN(product, Scratch(g.batch * g.m * g.n));
    d = F32(product);
    beta = 0.0f;
    ldd = g.n;
    stride_d = g.m * g.n;
  }

  GemmKey key;
  key.trans_a = g.trans_b;  // cuBLASLt's A is our b
  key.trans_b = g.trans_a;
  key.m = g.n;
  key.n = g.m;
  key.k = g.k;
  key.batch = g.batch;
  key.lda = g.ldb;
  key.ldb = g.lda;
  key.ldc = ldd;
  key.stride_a = g.stride_b;
  key.stride_b = g.stride_a;
  key.stride_c = stride_d;
  key.ab_type = ab_type;
  key.compute = compute;
  key.bias = bias != nullptr;
  key.gelu_aux = g.gelu_aux != nullptr;
  key.aux_ld = key.gelu_aux ? g.n : 0;  // cuBLASLt's aux is [n, m] column-major: our row-major [m, n]
  key.align_a = PointerAlignment(b);
  key.align_b = PointerAlignment(a);
  key.align_c = PointerAlignment(d);
  key.align_aux = key.gelu_aux ? PointerAlignment(g.gelu_aux) : 256;
  absl::StatusOr<const GemmPlan*> plan = gemm_plans.Get(cublaslt, key, kGemmWorkspaceBytes);
  if (!plan.ok() && key.gelu_aux) return absl::UnimplementedError(plan.status().message());
  if (!plan.ok()) return plan.status();
  if (bias != nullptr) {
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute((*plan)->desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                          &bias, sizeof bias));
  }
  if (key.gelu_aux) {
    void* aux = g.gelu_aux;
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        (*plan)->desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
  }
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(cublaslt, (*plan)->desc.get(), &g.alpha, b, (*plan)->a.get(), a,
                                        (*plan)->b.get(), &beta, d, (*plan)->c.get(), d, (*plan)->c.get(),
                                        &(*plan)->algo, gemm_workspace, kGemmWorkspaceBytes, s));
  if (!mixed() || (!separate && !g.round_output)) return absl::OkStatus();
  const int64_t total = g.batch * g.m * g.n;
  if (!separate) {
    // c is dense here (ldc == n, stride == m * n, as every caller passes).
    CUDA_RETURN_IF_ERROR(kernels::LaunchRound(g.c, g.c, total, rt, s));
    if (g.gelu_aux != nullptr) CUDA_RETURN_IF_ERROR(kernels::LaunchRound(g.gelu_aux, g.gelu_aux, total, rt, s));
    return absl::OkStatus();
  }
  if (g.beta != 1.0f) CUDA_RETURN_IF_ERROR(kernels::LaunchScale(g.c, total, g.beta, s));
  CUDA_RETURN_IF_ERROR(kernels::LaunchAccumulateRounded(d, g.c, total, rt, s));
  return absl::OkStatus();
}

void CudaBackend::Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                       const Tensor& c, const Tensor* bias) {
  const GemmCall g = GemmCallFor(trans_a, trans_b, alpha, a, b, beta, c, bias);
  if (g.k == 0) {  // an empty product: c = beta * c + bias
    impl_->Run([&] {
      CUDA_RETURN_IF_ERROR(kernels::LaunchScale(g.c, c.numel(), beta, compute_stream()));
      if (bias != nullptr) {
        for (int64_t row = 0; row < g.m; ++row) {
          CUDA_RETURN_IF_ERROR(kernels::LaunchAxpy(1.0f, g.bias, g.c + row * g.n, g.n, compute_stream()));
        }
      }
      return absl::OkStatus();
    });
    return;
  }
  impl_->Run([&] { return impl_->Gemm(g); });
}

// GPT-2's c_fc + GELU. cuBLASLt's GELU epilogue is the tanh approximation
// (PyTorch's _addmm_activation relies on it: pytorch/pytorch#104061; the
// cuBLASLt docs name no formula), the one GeluForward computes; the fp32 GPU
// test against the CPU twin (1e-5) would catch the erf form (up to 4e-4
// apart). With a 16-bit compute dtype the epilogue applies GELU to the fp32
// pre-activation, so y = round(gelu(pre)) where the unfused ops give
// round(gelu(round(pre))): within the 16-bit tolerance, not bitwise.
// Falls back to Gemm + bias, then our GELU kernel, when N is not a multiple
// of 8 (the aux leading dimension must be) or cuBLASLt has no algorithm with
// the epilogue for this shape/dtype (remembered per shape by the plan cache).
void CudaBackend::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                                    const Tensor& y) {
  CheckDeviceF32(pre, "LinearGelu pre");
  GemmCall g = GemmCallFor(false, true, 1.0f, x, w, 0.0f, y, &bias);
  ENGINE_CHECK(pre.shape() == y.shape(), "LinearGelu pre {} y {}", ShapeString(pre.shape()), ShapeString(y.shape()));
  if (g.k == 0 || g.n % 8 != 0) {  // the unfused ops (Gemm handles k == 0)
    Gemm(false, true, 1.0f, x, w, 0.0f, pre, &bias);
    GeluForward(pre, y);
    return;
  }
  g.gelu_aux = F32(pre);
  impl_->Run([&]() -> absl::Status {
    absl::Status fused = impl_->Gemm(g);
    if (!absl::IsUnimplemented(fused)) return fused;
    GemmCall unfused = g;
    unfused.c = g.gelu_aux;
    unfused.gelu_aux = nullptr;
    RETURN_IF_ERROR(impl_->Gemm(unfused));
    CUDA_RETURN_IF_ERROR(kernels::LaunchGelu(F32(pre), F32(y), y.numel(), impl_->round(), compute_stream()));
    return absl::OkStatus();
  });
}

void CudaBackend::GemmBatched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                              const Tensor& c) {
  CheckDeviceF32(a, "GemmBatched a");
  CheckDeviceF32(b, "GemmBatched b");
  CheckDeviceF32(c, "GemmBatched c");
  ENGINE_CHECK(a.rank() == 3 && b.rank() == 3 && c.rank() == 3, "GemmBatched needs rank-3 tensors");
  const int64_t batch = a.dim(0);
  ENGINE_CHECK(b.dim(0) == batch && c.dim(0) == batch, "GemmBatched batch sizes differ");
  GemmCall g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = trans_a ? a.dim(2) : a.dim(1);
  g.k = trans_a ? a.dim(1) : a.dim(2);
  g.n = trans_b ? b.dim(1) : b.dim(2);
  ENGINE_CHECK((trans_b ? b.dim(2) : b.dim(1)) == g.k, "GemmBatched inner dims");
  ENGINE_CHECK(c.dim(1) == g.m && c.dim(2) == g.n, "GemmBatched c {}", ShapeString(c.shape()));
  ENGINE_CHECK(g.k > 0, "GemmBatched with an empty inner dimension");
  g.batch = batch;
  g.alpha = alpha;
  g.beta = beta;
  g.a = F32(a);
  g.lda = a.dim(2);
  g.stride_a = a.dim(1) * a.dim(2);
  g.b = F32(b);
  g.ldb = b.dim(2);
  g.stride_b = b.dim(1) * b.dim(2);
  g.c = F32(c);
  g.ldc = g.n;
  g.stride_c = g.m * g.n;
  if (batch == 0) return;
  impl_->Run([&] { return impl_->Gemm(g); });
}

void CudaBackend::BiasGrad(const Tensor& dy, const Tensor& dbias) {
  CheckDeviceF32(dy, "BiasGrad dy");
  CheckDeviceF32(dbias, "BiasGrad dbias");
  const int64_t n = dy.dim(-1);
  const int64_t m = n == 0 ? 0 : dy.numel() / n;
  ENGINE_CHECK(dbias.numel() == n, "BiasGrad dbias {} for dy {}", ShapeString(dbias.shape()),
               ShapeString(dy.shape()));
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(Tensor scratch, impl_->Scratch(kernels::ColumnSumScratchFloats(m, n)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchColumnSum(F32(dy), m, n, F32(scratch), F32(dbias), /*accumulate=*/true,
                                                  impl_->round(), compute_stream()));
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::engine
