#ifndef RINGMASTER_ENGINE_CORE_REFERENCE_OPS_H_
#define RINGMASTER_ENGINE_CORE_REFERENCE_OPS_H_

// Naive reference loops (double accumulation, single thread) that the CPU
// backend, and later the CUDA backend, are tested against. Test-only.
// Vectors are row-major with the shapes named in each comment.

#include <cstdint>
#include <vector>

#include "engine/core/backend.h"

namespace ringmaster::engine::ref {

using Vec = std::vector<float>;

// c[m, n] = alpha * op(a) op(b) + beta * c + bias[n] (bias may be empty).
Vec Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const Vec& a, const Vec& b, float beta,
         const Vec& c, const Vec& bias);

struct ConvShape {
  int64_t n, c, h, w, o;
  Conv2dGeometry g;
  int64_t oh() const { return Conv2dGeometry::OutSize(h, g.kernel_h, g.stride_h, g.pad_h); }
  int64_t ow() const { return Conv2dGeometry::OutSize(w, g.kernel_w, g.stride_w, g.pad_w); }
};
Vec Conv2d(const ConvShape& s, const Vec& x, const Vec& w, const Vec& bias);
// Gradients of sum(dy * Conv2d(x, w, b)).
void Conv2dBackward(const ConvShape& s, const Vec& x, const Vec& w, const Vec& dy, Vec* dx, Vec* dw, Vec* db);

// x [n, c, h, w], kernel k, stride s.
Vec MaxPool(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, const Vec& x);
Vec MaxPoolBackward(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t s, const Vec& x, const Vec& dy);

// Training-mode batch norm: y, and the batch mean and biased variance per channel.
void BatchNorm(int64_t n, int64_t c, int64_t hw, const Vec& x, const Vec& gamma, const Vec& beta, float eps, Vec* y,
               Vec* mean, Vec* var);
void BatchNormBackward(int64_t n, int64_t c, int64_t hw, const Vec& x, const Vec& gamma, const Vec& dy, float eps,
                       Vec* dx, Vec* dgamma, Vec* dbeta);

void LayerNorm(int64_t rows, int64_t c, const Vec& x, const Vec& gamma, const Vec& beta, float eps, Vec* y);
void LayerNormBackward(int64_t rows, int64_t c, const Vec& x, const Vec& gamma, const Vec& dy, float eps, Vec* dx,
                       Vec* dgamma, Vec* dbeta);

// qkv [b, t, 3c] -> out [b, t, c].
Vec Attention(int64_t b, int64_t t, int64_t c, int64_t nh, const Vec& qkv);
Vec AttentionBackward(int64_t b, int64_t t, int64_t c, int64_t nh, const Vec& qkv, const Vec& dout);

// Mean cross-entropy over rows whose target != ignore, and its gradient.
float SoftmaxCrossEntropy(int64_t m, int64_t v, const Vec& logits, const std::vector<int32_t>& targets, int32_t ignore,
                          Vec* dlogits);

float Gelu(float x);
float GeluGrad(float x);  // d Gelu / dx

}  // namespace ringmaster::engine::ref

#endif  // RINGMASTER_ENGINE_CORE_REFERENCE_OPS_H_
