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

// The operands' and the output's dtypes: a and b activations (or operand
// copies), c an activation or f32 (a parameter gradient).
void CheckGemmTypes(const Tensor& a, const Tensor& b, const Tensor& c, DType act, const char* what) {
  CheckDeviceAct(a, act, what);
  CheckDeviceAct(b, act, what);
  ENGINE_CHECK(c.defined() && c.device() == Device::kCuda && (c.dtype() == act || c.dtype() == DType::kF32),
               "{}: c must be a CUDA tensor of {} or f32, got {}", what, DTypeName(act),
               c.defined() ? DTypeName(c.dtype()) : "undefined");
}

// The GemmCall of Backend::Gemm's arguments, checked (a mismatch is a caller bug).
GemmCall GemmCallFor(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                     const Tensor& c, const Tensor* bias, DType act) {
  CheckGemmTypes(a, b, c, act, "Gemm");
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
    ENGINE_CHECK(c.dtype() == act, "Gemm with a bias writes an activation");
    CheckDeviceAct(*bias, act, "Gemm bias (its operand copy)");
    ENGINE_CHECK(bias->numel() == g.n, "Gemm bias {} for N = {}", ShapeString(bias->shape()), g.n);
  }
  g.alpha = alpha;
  g.beta = beta;
  g.ab_type = act;
  g.c_type = c.dtype();
  g.a = a.raw();
  g.lda = ad.cols;
  g.b = b.raw();
  g.ldb = bd.cols;
  g.c = c.raw();
  g.ldc = g.n;
  g.bias = bias != nullptr ? bias->raw() : nullptr;
  return g;
}

}  // namespace

absl::Status CudaBackend::Impl::Gemm(const GemmCall& g) {
  if (g.m == 0 || g.n == 0) return absl::OkStatus();
  ENGINE_CHECK(g.gelu_aux == nullptr || (g.bias != nullptr && g.batch == 1 && g.beta == 0.0f && g.n % 8 == 0),
               "GELU epilogue GEMM needs a bias, batch 1, beta 0 and n % 8 == 0");
  GemmKey key;
  key.trans_a = g.trans_b;  // cuBLASLt's A is our b
  key.trans_b = g.trans_a;
  key.m = g.n;
  key.n = g.m;
  key.k = g.k;
  key.batch = g.batch;
  key.lda = g.ldb;
  key.ldb = g.lda;
  key.ldc = g.ldc;
  key.stride_a = g.stride_b;
  key.stride_b = g.stride_a;
  key.stride_c = g.stride_c;
  key.ab_type = CudaType(g.ab_type);
  key.c_type = CudaType(g.c_type);
  key.compute = g.ab_type == DType::kF32 && config.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  key.bias = g.bias != nullptr;
  key.gelu_aux = g.gelu_aux != nullptr;
  key.aux_ld = key.gelu_aux ? g.n : 0;  // cuBLASLt's aux is [n, m] column-major: our row-major [m, n]
  key.align_a = PointerAlignment(g.b);
  key.align_b = PointerAlignment(g.a);
  key.align_c = PointerAlignment(g.c);
  key.align_aux = key.gelu_aux ? PointerAlignment(g.gelu_aux) : 256;
  absl::StatusOr<const GemmPlan*> plan = gemm_plans.Get(cublaslt, key, kGemmWorkspaceBytes);
  if (!plan.ok() && key.gelu_aux) return absl::UnimplementedError(plan.status().message());
  if (!plan.ok()) return plan.status();
  if (g.bias != nullptr) {
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute((*plan)->desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                          &g.bias, sizeof g.bias));
  }
  if (key.gelu_aux) {
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        (*plan)->desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.gelu_aux, sizeof g.gelu_aux));
  }
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(cublaslt, (*plan)->desc.get(), &g.alpha, g.b, (*plan)->a.get(), g.a,
                                        (*plan)->b.get(), &g.beta, g.c, (*plan)->c.get(), g.c, (*plan)->c.get(),
                                        &(*plan)->algo, gemm_workspace, kGemmWorkspaceBytes, stream.get()));
  return absl::OkStatus();
}

void CudaBackend::Gemm(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                       const Tensor& c, const Tensor* bias) {
  const GemmCall g = GemmCallFor(trans_a, trans_b, alpha, a, b, beta, c, bias, impl_->act_dtype());
  if (g.k == 0) {  // an empty product: c = beta * c (+ bias on every row), an activation or f32
    impl_->Run([&]() -> absl::Status {
      const cudaStream_t s = compute_stream();
      const kernels::FloatType ct = AsFloatType(c.dtype());
      ASSIGN_OR_RETURN(Tensor wide, impl_->Scratch(c.numel()));
      CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(c.raw(), ct, wide.raw(), kernels::FloatType::kF32, c.numel(), s));
      CUDA_RETURN_IF_ERROR(kernels::LaunchScale(F32(wide), c.numel(), beta, s));
      if (bias != nullptr) {
        ASSIGN_OR_RETURN(Tensor wide_bias, impl_->Scratch(g.n));
        CUDA_RETURN_IF_ERROR(
            kernels::LaunchConvert(bias->raw(), ct, wide_bias.raw(), kernels::FloatType::kF32, g.n, s));
        for (int64_t row = 0; row < g.m; ++row) {
          CUDA_RETURN_IF_ERROR(kernels::LaunchAxpy(1.0f, F32(wide_bias), F32(wide) + row * g.n, g.n, s));
        }
      }
      CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(wide.raw(), kernels::FloatType::kF32, c.raw(), ct, c.numel(), s));
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
// pre-activation and stores both in 16 bits, so y = round(gelu(pre)) where
// the unfused ops give round(gelu(round(pre))): within the 16-bit tolerance,
// not bitwise. Falls back to Gemm + bias, then our GELU kernel, when N is not
// a multiple of 8 (the aux leading dimension must be) or cuBLASLt has no
// algorithm with the epilogue for this shape/dtype (remembered per shape by
// the plan cache).
void CudaBackend::LinearGeluForward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& pre,
                                    const Tensor& y) {
  const DType act = impl_->act_dtype();
  CheckDeviceAct(pre, act, "LinearGelu pre");
  CheckDeviceAct(y, act, "LinearGelu y");
  GemmCall g = GemmCallFor(false, true, 1.0f, x, w, 0.0f, y, &bias, act);
  ENGINE_CHECK(pre.shape() == y.shape(), "LinearGelu pre {} y {}", ShapeString(pre.shape()), ShapeString(y.shape()));
  if (g.k == 0 || g.n % 8 != 0) {  // the unfused ops (Gemm handles k == 0)
    Gemm(false, true, 1.0f, x, w, 0.0f, pre, &bias);
    GeluForward(pre, y);
    return;
  }
  g.gelu_aux = pre.raw();
  impl_->Run([&]() -> absl::Status {
    absl::Status fused = impl_->Gemm(g);
    if (!absl::IsUnimplemented(fused)) return fused;
    GemmCall unfused = g;
    unfused.c = g.gelu_aux;
    unfused.gelu_aux = nullptr;
    RETURN_IF_ERROR(impl_->Gemm(unfused));
    CUDA_RETURN_IF_ERROR(kernels::LaunchGelu(pre.raw(), y.raw(), y.numel(), impl_->act(), compute_stream()));
    return absl::OkStatus();
  });
}

void CudaBackend::GemmBatched(bool trans_a, bool trans_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                              const Tensor& c) {
  CheckGemmTypes(a, b, c, impl_->act_dtype(), "GemmBatched");
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
  g.ab_type = impl_->act_dtype();
  g.c_type = c.dtype();
  g.a = a.raw();
  g.lda = a.dim(2);
  g.stride_a = a.dim(1) * a.dim(2);
  g.b = b.raw();
  g.ldb = b.dim(2);
  g.stride_b = b.dim(1) * b.dim(2);
  g.c = c.raw();
  g.ldc = g.n;
  g.stride_c = g.m * g.n;
  if (batch == 0) return;
  impl_->Run([&] { return impl_->Gemm(g); });
}

void CudaBackend::BiasGrad(const Tensor& dy, const Tensor& dbias) {
  CheckDeviceAct(dy, impl_->act_dtype(), "BiasGrad dy");
  CheckDeviceF32(dbias, "BiasGrad dbias");
  const int64_t n = dy.dim(-1);
  const int64_t m = n == 0 ? 0 : dy.numel() / n;
  ENGINE_CHECK(dbias.numel() == n, "BiasGrad dbias {} for dy {}", ShapeString(dbias.shape()),
               ShapeString(dy.shape()));
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(Tensor scratch, impl_->Scratch(kernels::ColumnSumScratchFloats(m, n)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchColumnSum(dy.raw(), impl_->act(), m, n, F32(scratch), F32(dbias),
                                                  /*accumulate=*/true, compute_stream()));
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::engine
