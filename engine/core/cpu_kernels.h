#ifndef RINGMASTER_ENGINE_CORE_CPU_KERNELS_H_
#define RINGMASTER_ENGINE_CORE_CPU_KERNELS_H_

// Single-threaded building blocks of the CPU backend (internal to
// engine/core): rounding a buffer to a compute dtype, and a row-major GEMM on
// raw pointers through OpenBLAS with bias, beta and output rounding.

#include <cstdint>

#include "engine/core/check.h"
#include "engine/core/dtype.h"
#include "engine/core/tensor.h"

namespace ringmaster::engine::cpu {

// x[i] = RoundTo(dtype, x[i]) for i in [0, n); vectorised (F16C for f16).
void RoundBuffer(DType dtype, float* x, int64_t n);

// C[m, n] = alpha * op(A) op(B) + beta * C (+ bias[n] on every row), row-major
// with leading dimensions lda/ldb/ldc. With round != kF32 the new part
// alpha * op(A) op(B) + bias is rounded before beta * C is added in fp32.
// Operands are used as given (round them beforehand if needed).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  int64_t ldc = 0;
  const float* bias = nullptr;  // [n] or null
};
void GemmSerial(const GemmArgs& g, DType round);

// The rows [m0, m1) (split_rows) or columns [n0, n1) of the product, as a GemmArgs.
GemmArgs GemmRowBlock(const GemmArgs& g, int64_t m0, int64_t m1);
GemmArgs GemmColBlock(const GemmArgs& g, int64_t n0, int64_t n1);

// Tensor checks shared by the kernels (violations are caller bugs).
inline void CheckF32(const Tensor& t, const char* what) {
  ENGINE_CHECK(t.defined() && t.dtype() == DType::kF32 && t.device() == Device::kCpu, "{} must be an f32 CPU tensor",
               what);
}
inline void CheckSameNumel(const Tensor& a, const Tensor& b, const char* what) {
  ENGINE_CHECK(a.numel() == b.numel(), "{}: {} vs {}", what, ShapeString(a.shape()), ShapeString(b.shape()));
}

}  // namespace ringmaster::engine::cpu

#endif  // RINGMASTER_ENGINE_CORE_CPU_KERNELS_H_
