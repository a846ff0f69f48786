#include "engine/cuda/gemm_plan_cache.h"

#include "absl/strings/str_format.h"
#include "engine/core/cuda_status.h"

namespace ringmaster::engine {
namespace {

template <typename T>
cublasStatus_t SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  return cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value);
}

template <typename T>
cublasStatus_t SetLayout(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr, const T& value) {
  return cublasLtMatrixLayoutSetAttribute(layout, attr, &value, sizeof value);
}

absl::StatusOr<std::unique_ptr<cublasLtMatrixLayoutOpaque_t, GemmPlan::LayoutDeleter>> MakeLayout(
    cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t raw = nullptr;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&raw, type, rows, cols, ld));
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, GemmPlan::LayoutDeleter> layout(raw);
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    CUBLAS_RETURN_IF_ERROR(SetLayout(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count));
    CUBLAS_RETURN_IF_ERROR(SetLayout(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride));
  }
  return layout;
}

}  // namespace

uint32_t PointerAlignment(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && address % align != 0) align /= 2;
  return align;
}

absl::StatusOr<const GemmPlan*> GemmPlanCache::Get(cublasLtHandle_t handle, const GemmKey& key,
                                                    size_t workspace_bytes) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  auto failed = no_algorithm_.find(key);
  if (failed != no_algorithm_.end()) return failed->second;

  auto plan = std::make_unique<GemmPlan>();
  cublasLtMatmulDesc_t desc = nullptr;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&desc, key.compute, CUDA_R_32F));
  plan->desc.reset(desc);
  const cublasOperation_t op_a = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a));
  CUBLAS_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b));
  if (key.bias) {
    const cublasLtEpilogue_t epilogue = key.gelu_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue));
    const int32_t bias_type = key.c_type;  // a bias of D's type (the operand copy of a 16-bit GEMM)
    CUBLAS_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type));
  }
  if (key.gelu_aux) {
    if (!key.bias) return absl::InvalidArgumentError("the GELU_AUX epilogue is only used with a bias");
    CUBLAS_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.aux_ld));
    // The heuristic reads the aux pointer's value for its alignment only: a
    // stand-in address with the key's alignment; the call sets the real one.
    const void* aux = reinterpret_cast<const void*>(uintptr_t{key.align_aux});
    CUBLAS_RETURN_IF_ERROR(SetDesc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux));
  }
  // Stored shapes: A is [m, k] (or [k, m] transposed), B is [k, n] (or [n, k]).
  auto a = MakeLayout(key.ab_type, key.trans_a ? key.k : key.m, key.trans_a ? key.m : key.k, key.lda, key.batch,
                      key.stride_a);
  if (!a.ok()) return a.status();
  auto b = MakeLayout(key.ab_type, key.trans_b ? key.n : key.k, key.trans_b ? key.k : key.n, key.ldb, key.batch,
                      key.stride_b);
  if (!b.ok()) return b.status();
  auto c = MakeLayout(key.c_type, key.m, key.n, key.ldc, key.batch, key.stride_c);
  if (!c.ok()) return c.status();
  plan->a = std::move(*a);
  plan->b = std::move(*b);
  plan->c = std::move(*c);

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, decltype(&cublasLtMatmulPreferenceDestroy)> pref_owner(
      pref, &cublasLtMatmulPreferenceDestroy);
  const uint64_t workspace = workspace_bytes;
  CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace, sizeof workspace));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c},
  };
  for (const auto& [attr, value] : aligns) {
    CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value));
  }
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  const cublasStatus_t heuristic = cublasLtMatmulAlgoGetHeuristic(
      handle, desc, plan->a.get(), plan->b.get(), plan->c.get(), plan->c.get(), pref, 1, &result, &found);
  // An epilogue cuBLASLt does not support for these types/shape answers
  // NOT_SUPPORTED rather than no algorithm: both mean "no plan".
  if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED) {
    found = 0;
  } else {
    CUBLAS_RETURN_IF_ERROR(heuristic);
  }
  if (found == 0) {
    return no_algorithm_[key] = absl::InternalError(absl::StrFormat(
        "cuBLASLt has no algorithm for a %dx%dx%d GEMM (batch %d, A/B type %d, C/D type %d, compute %d, "
        "alignments %d/%d/%d, GELU epilogue %d, workspace %d bytes)",
        key.m, key.n, key.k, key.batch, static_cast<int>(key.ab_type), static_cast<int>(key.c_type),
        static_cast<int>(key.compute), key.align_a, key.align_b, key.align_c, key.gelu_aux, workspace_bytes));
  }
  plan->algo = result.algo;
  const GemmPlan* out = plan.get();
  plans_.emplace(key, std::move(plan));
  return out;
}

}  // namespace ringmaster::engine
