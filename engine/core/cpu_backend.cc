// CpuBackend: construction, memory and elementwise ops.

#include "engine/core/cpu_backend.h"

#include <cblas.h>

#include <cmath>
#include <cstring>

#include "engine/core/check.h"
#include "engine/core/cpu_kernels.h"

namespace ringmaster::engine {

using cpu::CheckF32;
using cpu::CheckSameNumel;

namespace {
constexpr int64_t kElementwiseGrain = 1 << 15;
}  // namespace

CpuBackend::CpuBackend(const CpuBackendConfig& config)
    : compute_dtype_(config.compute_dtype), pool_(config.num_threads) {
  ENGINE_CHECK(compute_dtype_ != DType::kI32, "i32 is not a compute dtype");
  // The backend parallelises around OpenBLAS; its own threads would oversubscribe.
  openblas_set_num_threads(1);
}

Tensor CpuBackend::Empty(const Shape& shape, DType dtype) { return allocator_->Empty(shape, dtype); }

Tensor CpuBackend::Zeros(const Shape& shape, DType dtype) {
  Tensor t = allocator_->Empty(shape, dtype);
  std::memset(t.raw(), 0, t.bytes());
  return t;
}

void CpuBackend::CopyFromHost(const Tensor& host_src, const Tensor& dst) { Copy(host_src, dst); }
void CpuBackend::CopyToHost(const Tensor& src, const Tensor& host_dst) { Copy(src, host_dst); }

void CpuBackend::Copy(const Tensor& src, const Tensor& dst) {
  ENGINE_CHECK(src.device() == Device::kCpu && dst.device() == Device::kCpu, "CPU copy of a device tensor");
  ENGINE_CHECK(src.dtype() == dst.dtype(), "copy {} -> {}", DTypeName(src.dtype()), DTypeName(dst.dtype()));
  CheckSameNumel(src, dst, "Copy");
  if (src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), src.bytes());
}

void CpuBackend::Fill(const Tensor& x, float value) {
  CheckF32(x, "Fill x");
  float* p = x.f32();
  pool_.ParallelFor(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = value;
  });
}

void CpuBackend::Scale(const Tensor& x, float alpha) {
  CheckF32(x, "Scale x");
  float* p = x.f32();
  pool_.ParallelFor(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] *= alpha;
  });
}

void CpuBackend::Axpy(float alpha, const Tensor& x, const Tensor& y) {
  CheckF32(x, "Axpy x");
  CheckF32(y, "Axpy y");
  CheckSameNumel(x, y, "Axpy");
  const float* xp = x.f32();
  float* yp = y.f32();
  pool_.ParallelFor(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) yp[i] += alpha * xp[i];
  });
}

void CpuBackend::Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  CheckF32(a, "Add a");
  CheckF32(b, "Add b");
  CheckF32(out, "Add out");
  CheckSameNumel(a, b, "Add");
  CheckSameNumel(a, out, "Add");
  const float* ap = a.f32();
  const float* bp = b.f32();
  float* op = out.f32();
  pool_.ParallelFor(a.numel(), kElementwiseGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) op[i] = ap[i] + bp[i];
    cpu::RoundBuffer(compute_dtype_, op + s, e - s);
  });
}

void CpuBackend::Convert(const Tensor& src, const Tensor& dst) {
  CheckSameNumel(src, dst, "Convert");
  ENGINE_CHECK(src.dtype() != DType::kI32 && dst.dtype() != DType::kI32, "Convert of i32");
  if (src.dtype() == dst.dtype()) {
    Copy(src, dst);
    return;
  }
  const int64_t n = src.numel();
  pool_.ParallelFor(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float v;
      switch (src.dtype()) {
        case DType::kF16: v = HalfToFloat(src.u16()[i]); break;
        case DType::kBF16: v = BFloat16ToFloat(src.u16()[i]); break;
        default: v = src.f32()[i]; break;
      }
      switch (dst.dtype()) {
        case DType::kF16: dst.u16()[i] = FloatToHalf(v); break;
        case DType::kBF16: dst.u16()[i] = FloatToBFloat16(v); break;
        default: dst.f32()[i] = v; break;
      }
    }
  });
}

void CpuBackend::RoundInPlace(const Tensor& x, DType dtype) {
  CheckF32(x, "RoundInPlace x");
  float* p = x.f32();
  pool_.ParallelFor(x.numel(), kElementwiseGrain,
                    [&](int64_t b, int64_t e) { cpu::RoundBuffer(dtype, p + b, e - b); });
}

void CpuBackend::NonFiniteCheck(const std::vector<Tensor>& tensors, const Tensor& flag) {
  CheckF32(flag, "NonFiniteCheck flag");
  ENGINE_CHECK(flag.numel() == 1, "flag must have one element");
  bool bad = false;
  for (const Tensor& t : tensors) {
    CheckF32(t, "NonFiniteCheck tensor");
    const float* p = t.f32();
    const int chunks = pool_.NumChunks(t.numel(), kElementwiseGrain);
    std::vector<char> chunk_bad(chunks, 0);
    pool_.ParallelForChunks(t.numel(), kElementwiseGrain, [&](int c, int64_t b, int64_t e) {
      // Inf - inf and NaN - NaN are NaN; the sum of (x - x) is zero only if all are finite.
      float acc = 0.0f;
      for (int64_t i = b; i < e; ++i) acc += p[i] - p[i];
      chunk_bad[c] = acc != 0.0f || std::isnan(acc);
    });
    for (char c : chunk_bad) bad = bad || c;
    if (bad) break;
  }
  if (bad) flag.f32()[0] = 1.0f;
}

Tensor CpuBackend::RoundedOperand(const Tensor& x) {
  if (compute_dtype_ == DType::kF32) return x;
  Tensor r = Empty(x.shape());
  const float* s = x.f32();
  float* d = r.f32();
  pool_.ParallelFor(x.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    std::memcpy(d + b, s + b, (e - b) * sizeof(float));
    cpu::RoundBuffer(compute_dtype_, d + b, e - b);
  });
  return r;
}

void CpuBackend::RoundOutput(float* x, int64_t n) {
  if (compute_dtype_ == DType::kF32) return;
  pool_.ParallelFor(n, kElementwiseGrain, [&](int64_t b, int64_t e) { cpu::RoundBuffer(compute_dtype_, x + b, e - b); });
}

}  // namespace ringmaster::engine
