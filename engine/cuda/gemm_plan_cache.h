#ifndef RINGMASTER_ENGINE_CUDA_GEMM_PLAN_CACHE_H_
#define RINGMASTER_ENGINE_CUDA_GEMM_PLAN_CACHE_H_

// cuBLASLt matmul plans (operation descriptor, matrix layouts and the
// heuristic's algorithm), built once per GEMM shape and reused. Descriptors
// are owned through RAII. Not thread-safe (the backend's thread uses it).

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/statusor.h"

namespace ringmaster::engine {

// A column-major cuBLASLt problem D[m, n] = alpha op(A) op(B) + beta C (+ bias[m]),
// fp32 scale and accumulation whatever the storage types.
struct GemmKey {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  cudaDataType_t ab_type = CUDA_R_32F;
  cudaDataType_t c_type = CUDA_R_32F;  // C and D (and the bias, the GELU aux)
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool bias = false;
  // CUBLASLT_EPILOGUE_GELU_AUX_BIAS (needs bias): D = gelu(product + bias) and
  // the aux matrix [m, n] (f32, leading dimension aux_ld) = product + bias.
  bool gelu_aux = false;
  int64_t aux_ld = 0;
  // Alignment (bytes, a power of two up to 256) the pointers are known to have.
  uint32_t align_a = 256, align_b = 256, align_c = 256, align_aux = 256;

  auto Tie() const {
    return std::tie(trans_a, trans_b, m, n, k, batch, lda, ldb, ldc, stride_a, stride_b, stride_c, ab_type, c_type,
                    compute, bias, gelu_aux, aux_ld, align_a, align_b, align_c, align_aux);
  }
  bool operator<(const GemmKey& other) const { return Tie() < other.Tie(); }
};

struct GemmPlan {
  struct DescDeleter {
    void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  };
  struct LayoutDeleter {
    void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
  };
  std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter> desc;
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter> a, b, c;
  cublasLtMatmulAlgo_t algo;
};

class GemmPlanCache {
 public:
  // The plan for `key`, built on first use. INTERNAL (with cuBLASLt's status)
  // when cuBLASLt has no algorithm for it within `workspace_bytes`; a key
  // without one is remembered and fails again at once.
  absl::StatusOr<const GemmPlan*> Get(cublasLtHandle_t handle, const GemmKey& key, size_t workspace_bytes);
  size_t size() const { return plans_.size(); }

 private:
  std::map<GemmKey, std::unique_ptr<GemmPlan>> plans_;
  std::map<GemmKey, absl::Status> no_algorithm_;
};

// The largest power of two (<= 256) dividing the address.
uint32_t PointerAlignment(const void* p);

}  // namespace ringmaster::engine

#endif  // RINGMASTER_ENGINE_CUDA_GEMM_PLAN_CACHE_H_
