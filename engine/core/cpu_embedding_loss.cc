// CpuBackend: token + position embedding, and fused softmax cross-entropy.

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/core/check.h"
#include "engine/core/cpu_backend.h"
#include "engine/core/cpu_kernels.h"

namespace ringmaster::engine {

using cpu::CheckF32;

namespace {
// Columns per chunk of the scatter-add (each chunk owns its columns of dwte/dwpe).
constexpr int64_t kScatterColumns = 16;
}  // namespace

void CpuBackend::EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) {
  ENGINE_CHECK(tokens.dtype() == DType::kI32 && tokens.rank() == 2, "tokens must be i32 [B, T]");
  CheckF32(wte, "wte");
  CheckF32(wpe, "wpe");
  CheckF32(out, "embedding out");
  const int64_t b = tokens.dim(0), t = tokens.dim(1), v = wte.dim(0), c = wte.dim(1);
  ENGINE_CHECK(wpe.dim(1) == c && wpe.dim(0) >= t && out.numel() == b * t * c, "embedding shapes");
  Tensor rte = RoundedOperand(wte), rpe = RoundedOperand(wpe);
  pool_.ParallelFor(b * t, 8, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int32_t tok = tokens.i32()[i];
      ENGINE_CHECK(tok >= 0 && tok < v, "token {} outside vocabulary {}", tok, v);
      const float* e = rte.f32() + tok * c;
      const float* p = rpe.f32() + (i % t) * c;
      float* o = out.f32() + i * c;
      for (int64_t j = 0; j < c; ++j) o[j] = e[j] + p[j];
      cpu::RoundBuffer(compute_dtype_, o, c);
    }
  });
}

void CpuBackend::EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte, const Tensor& dwpe) {
  ENGINE_CHECK(tokens.dtype() == DType::kI32 && tokens.rank() == 2, "tokens must be i32 [B, T]");
  CheckF32(dout, "embedding dout");
  CheckF32(dwte, "dwte");
  CheckF32(dwpe, "dwpe");
  const int64_t b = tokens.dim(0), t = tokens.dim(1), v = dwte.dim(0), c = dwte.dim(1);
  ENGINE_CHECK(dwpe.dim(1) == c && dwpe.dim(0) >= t && dout.numel() == b * t * c, "embedding backward shapes");
  const int64_t col_blocks = (c + kScatterColumns - 1) / kScatterColumns;
  // Each chunk owns a range of columns and walks the tokens in order: no races,
  // and the summation order is fixed.
  pool_.ParallelFor(col_blocks, 1, [&](int64_t k0, int64_t k1) {
    const int64_t j0 = k0 * kScatterColumns, j1 = std::min(c, k1 * kScatterColumns);
    for (int64_t i = 0; i < b * t; ++i) {
      const int32_t tok = tokens.i32()[i];
      ENGINE_CHECK(tok >= 0 && tok < v, "token {} outside vocabulary {}", tok, v);
      const float* g = dout.f32() + i * c;
      float* e = dwte.f32() + tok * c;
      float* p = dwpe.f32() + (i % t) * c;
      for (int64_t j = j0; j < j1; ++j) {
        e[j] += g[j];
        p[j] += g[j];
      }
    }
  });
}

void CpuBackend::CountTargets(const Tensor& targets, int32_t ignore_index, const Tensor& count) {
  ENGINE_CHECK(targets.dtype() == DType::kI32, "targets must be i32");
  CheckF32(count, "count");
  ENGINE_CHECK(count.numel() == 1, "count must have one element");
  int64_t n = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) n += targets.i32()[i] != ignore_index;
  count.f32()[0] = static_cast<float>(n);
}

void CpuBackend::SoftmaxCrossEntropyChunk(const Tensor& logits, int64_t v, const Tensor& targets,
                                          int32_t ignore_index, const Tensor& count, float grad_scale,
                                          const Tensor& loss, const Tensor* dlogits) {
  CheckF32(logits, "logits");
  CheckF32(loss, "loss");
  CheckF32(count, "count");
  ENGINE_CHECK(targets.dtype() == DType::kI32, "targets must be i32");
  const int64_t ld = logits.dim(-1), m = ld == 0 ? 0 : logits.numel() / ld;
  ENGINE_CHECK(v > 0 && v <= ld && targets.numel() == m && loss.numel() == 1 && count.numel() == 1,
               "softmax xent: logits {} with {} real columns, targets {}", ShapeString(logits.shape()), v,
               ShapeString(targets.shape()));
  if (dlogits != nullptr) {
    CheckF32(*dlogits, "dlogits");
    ENGINE_CHECK(dlogits->numel() == logits.numel(), "dlogits {} for logits {}", ShapeString(dlogits->shape()),
                 ShapeString(logits.shape()));
  }
  for (int64_t i = 0; i < m; ++i) {
    const int32_t y = targets.i32()[i];
    ENGINE_CHECK(y == ignore_index || (y >= 0 && y < v), "target {} outside [0, {})", y, v);
  }
  const float counted = count.f32()[0];
  const float g = counted > 0.0f ? grad_scale / counted : 0.0f;
  std::vector<double> row_loss(m, 0.0);
  pool_.ParallelFor(m, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* z = logits.f32() + r * ld;
      float* d = dlogits != nullptr ? dlogits->f32() + r * ld : nullptr;  // may be z itself
      const int32_t y = targets.i32()[r];
      if (y == ignore_index) {
        if (d != nullptr) std::fill(d, d + ld, 0.0f);
        continue;
      }
      float zmax = z[0];
      for (int64_t j = 1; j < v; ++j) zmax = std::max(zmax, z[j]);
      const float z_target = z[y];  // before d (perhaps z) is overwritten
      double sum = 0.0;
      for (int64_t j = 0; j < v; ++j) sum += std::exp(z[j] - zmax);
      row_loss[r] = std::log(sum) - (z_target - zmax);
      if (d == nullptr) continue;
      const float inv_sum = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < v; ++j) d[j] = g * (std::exp(z[j] - zmax) * inv_sum - (j == y ? 1.0f : 0.0f));
      std::fill(d + v, d + ld, 0.0f);
      cpu::RoundBuffer(compute_dtype_, d, v);
    }
  });
  double total = 0.0;
  for (double l : row_loss) total += l;
  if (counted > 0.0f) loss.f32()[0] += static_cast<float>(total / counted);
}

}  // namespace ringmaster::engine
