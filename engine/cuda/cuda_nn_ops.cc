// CudaBackend: activations, dropout, embedding, causal attention and the fused
// softmax cross-entropy (our kernels; attention's GEMMs through cuBLASLt).

#include <cmath>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/embedding.h"
#include "engine/kernels/softmax_ce.h"

namespace ringmaster::engine {
namespace {

kernels::AttentionDims CheckAttention(const Tensor& qkv, int64_t n_head, const Tensor& att) {
  CheckDeviceF32(qkv, "qkv");
  CheckDeviceF32(att, "att");
  ENGINE_CHECK(qkv.rank() == 3 && qkv.dim(2) % 3 == 0, "qkv must be [B, T, 3C], got {}", ShapeString(qkv.shape()));
  const int64_t c = qkv.dim(2) / 3;
  ENGINE_CHECK(n_head > 0 && c % n_head == 0, "C = {} not divisible by n_head = {}", c, n_head);
  kernels::AttentionDims d{qkv.dim(0), qkv.dim(1), n_head, c / n_head};
  ENGINE_CHECK(att.numel() == d.b * d.nh * d.t * d.t, "att {} for B={} H={} T={}", ShapeString(att.shape()), d.b,
               d.nh, d.t);
  return d;
}

// A batched GEMM over the b * nh heads of [b * nh, rows, cols] operands.
GemmCall HeadGemm(const kernels::AttentionDims& d, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  const float* a, int64_t a_cols, const float* b, int64_t b_cols, float* c) {
  GemmCall g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = d.b * d.nh;
  g.a = a;
  g.lda = a_cols;
  g.stride_a = (trans_a ? k : m) * a_cols;
  g.b = b;
  g.ldb = b_cols;
  g.stride_b = (trans_b ? n : k) * b_cols;
  g.c = c;
  g.ldc = n;
  g.stride_c = m * n;
  return g;
}

}  // namespace

// ------------------------------------------------------------- activations

void CudaBackend::ReluForward(const Tensor& x, const Tensor& y) {
  CheckDeviceF32(x, "Relu x");
  CheckDeviceF32(y, "Relu y");
  CheckSameNumelCuda(x, y, "Relu");
  RM_CUDA_OP(kernels::LaunchRelu(F32(x), F32(y), x.numel(), impl_->round(), compute_stream()));
}

void CudaBackend::ReluBackward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  CheckDeviceF32(y, "ReluBackward y");
  CheckDeviceF32(dy, "ReluBackward dy");
  CheckDeviceF32(dx, "ReluBackward dx");
  CheckSameNumelCuda(y, dy, "ReluBackward");
  CheckSameNumelCuda(y, dx, "ReluBackward");
  RM_CUDA_OP(kernels::LaunchReluBackward(F32(y), F32(dy), F32(dx), y.numel(), compute_stream()));
}

void CudaBackend::GeluForward(const Tensor& x, const Tensor& y) {
  CheckDeviceF32(x, "Gelu x");
  CheckDeviceF32(y, "Gelu y");
  CheckSameNumelCuda(x, y, "Gelu");
  RM_CUDA_OP(kernels::LaunchGelu(F32(x), F32(y), x.numel(), impl_->round(), compute_stream()));
}

void CudaBackend::GeluBackward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  CheckDeviceF32(x, "GeluBackward x");
  CheckDeviceF32(dy, "GeluBackward dy");
  CheckDeviceF32(dx, "GeluBackward dx");
  CheckSameNumelCuda(x, dy, "GeluBackward");
  CheckSameNumelCuda(x, dx, "GeluBackward");
  RM_CUDA_OP(kernels::LaunchGeluBackward(F32(x), F32(dy), F32(dx), x.numel(), impl_->round(), compute_stream()));
}

void CudaBackend::DropoutForward(const Tensor& x, float p, uint64_t key, const Tensor& mask, const Tensor& y) {
  CheckDeviceF32(x, "Dropout x");
  CheckDeviceF32(mask, "Dropout mask");
  CheckDeviceF32(y, "Dropout y");
  CheckSameNumelCuda(x, mask, "Dropout");
  CheckSameNumelCuda(x, y, "Dropout");
  ENGINE_CHECK(p >= 0.0f && p < 1.0f, "dropout p = {}", p);
  RM_CUDA_OP(kernels::LaunchDropout(F32(x), p, key, F32(mask), F32(y), x.numel(), impl_->round(), compute_stream()));
}

void CudaBackend::DropoutBackward(const Tensor& dy, const Tensor& mask, const Tensor& dx) {
  CheckDeviceF32(dy, "DropoutBackward dy");
  CheckDeviceF32(mask, "DropoutBackward mask");
  CheckDeviceF32(dx, "DropoutBackward dx");
  CheckSameNumelCuda(dy, mask, "DropoutBackward");
  CheckSameNumelCuda(dy, dx, "DropoutBackward");
  RM_CUDA_OP(kernels::LaunchMul(F32(dy), F32(mask), F32(dx), dy.numel(), impl_->round(), compute_stream()));
}

// --------------------------------------------------------------- embedding

void CudaBackend::EmbeddingForward(const Tensor& tokens, const Tensor& wte, const Tensor& wpe, const Tensor& out) {
  ENGINE_CHECK(tokens.dtype() == DType::kI32 && tokens.rank() == 2 && tokens.device() == Device::kCuda,
               "tokens must be i32 [B, T] on the device");
  CheckDeviceF32(wte, "wte");
  CheckDeviceF32(wpe, "wpe");
  CheckDeviceF32(out, "embedding out");
  const int64_t b = tokens.dim(0), t = tokens.dim(1), v = wte.dim(0), c = wte.dim(1);
  ENGINE_CHECK(wpe.dim(1) == c && wpe.dim(0) >= t && out.numel() == b * t * c, "embedding shapes");
  RM_CUDA_OP(kernels::LaunchEmbeddingForward(I32(tokens), F32(wte), F32(wpe), b, t, v, c, F32(out), impl_->round(),
                                             compute_stream()));
}

void CudaBackend::EmbeddingBackward(const Tensor& tokens, const Tensor& dout, const Tensor& dwte,
                                    const Tensor& dwpe) {
  ENGINE_CHECK(tokens.dtype() == DType::kI32 && tokens.rank() == 2 && tokens.device() == Device::kCuda,
               "tokens must be i32 [B, T] on the device");
  CheckDeviceF32(dout, "embedding dout");
  CheckDeviceF32(dwte, "dwte");
  CheckDeviceF32(dwpe, "dwpe");
  const int64_t b = tokens.dim(0), t = tokens.dim(1), v = dwte.dim(0), c = dwte.dim(1);
  ENGINE_CHECK(dwpe.dim(1) == c && dwpe.dim(0) >= t && dout.numel() == b * t * c, "embedding backward shapes");
  RM_CUDA_OP(
      kernels::LaunchEmbeddingBackward(I32(tokens), F32(dout), b, t, v, c, F32(dwte), F32(dwpe), compute_stream()));
}

// --------------------------------------------------------------- attention
//
// Heads are unpacked into [b * nh, t, hd] buffers, the scores and the output
// are batched cuBLASLt GEMMs, and the causal softmax is one fused kernel. The
// contract saves att [b, nh, t, t], so the probability matrix exists anyway;
// a flash-style kernel would need a contract without it.

void CudaBackend::AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& att, const Tensor& out) {
  const kernels::AttentionDims d = CheckAttention(qkv, n_head, att);
  CheckDeviceF32(out, "attention out");
  ENGINE_CHECK(out.numel() == d.b * d.t * d.nh * d.hd, "attention out {}", ShapeString(out.shape()));
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    const int64_t head_floats = d.b * d.nh * d.t * d.hd;
    ASSIGN_OR_RETURN(Tensor heads, impl_->Scratch(4 * head_floats));  // q, k, v, y
    float* q = F32(heads);
    float* k = q + head_floats;
    float* v = k + head_floats;
    float* y = v + head_floats;
    CUDA_RETURN_IF_ERROR(kernels::LaunchSplitHeads(F32(qkv), d, 3, q, k, v, s));
    GemmCall scores = HeadGemm(d, false, true, d.t, d.t, d.hd, q, d.hd, k, d.hd, F32(att));
    scores.alpha = 1.0f / std::sqrt(static_cast<float>(d.hd));
    scores.round_output = false;  // the CPU rounds the probabilities, not the scores
    RETURN_IF_ERROR(impl_->Gemm(scores));
    CUDA_RETURN_IF_ERROR(kernels::LaunchCausalSoftmax(F32(att), d, impl_->round(), s));
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, false, false, d.t, d.hd, d.t, F32(att), d.t, v, d.hd, y)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchMergeHeads(y, d, F32(out), impl_->round(), s));
    return absl::OkStatus();
  });
}

void CudaBackend::AttentionBackward(const Tensor& qkv, const Tensor& att, const Tensor& dout, int64_t n_head,
                                    const Tensor& dqkv) {
  const kernels::AttentionDims d = CheckAttention(qkv, n_head, att);
  CheckDeviceF32(dout, "attention dout");
  CheckDeviceF32(dqkv, "dqkv");
  ENGINE_CHECK(dout.numel() == d.b * d.t * d.nh * d.hd && dqkv.numel() == qkv.numel(), "attention backward shapes");
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    const int64_t head_floats = d.b * d.nh * d.t * d.hd;
    ASSIGN_OR_RETURN(Tensor heads, impl_->Scratch(7 * head_floats));  // q, k, v, do, dq, dk, dv
    ASSIGN_OR_RETURN(Tensor ds, impl_->Scratch(att.numel()));
    float* q = F32(heads);
    float* k = q + head_floats;
    float* v = k + head_floats;
    float* dout_h = v + head_floats;
    float* dq = dout_h + head_floats;
    float* dk = dq + head_floats;
    float* dv = dk + head_floats;
    CUDA_RETURN_IF_ERROR(kernels::LaunchSplitHeads(F32(qkv), d, 3, q, k, v, s));
    CUDA_RETURN_IF_ERROR(kernels::LaunchSplitHeads(F32(dout), d, 1, dout_h, nullptr, nullptr, s));
    // datt = dout_h @ v^T (fp32, as on the CPU), then ds in place.
    GemmCall datt = HeadGemm(d, false, true, d.t, d.t, d.hd, dout_h, d.hd, v, d.hd, F32(ds));
    datt.round_output = false;
    RETURN_IF_ERROR(impl_->Gemm(datt));
    // dv = att^T @ dout_h.
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, true, false, d.t, d.hd, d.t, F32(att), d.t, dout_h, d.hd, dv)));
    const float scale = 1.0f / std::sqrt(static_cast<float>(d.hd));
    CUDA_RETURN_IF_ERROR(kernels::LaunchCausalSoftmaxBackward(F32(att), F32(ds), d, scale, impl_->round(), s));
    // dq = ds @ k; dk = ds^T @ q.
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, false, false, d.t, d.hd, d.t, F32(ds), d.t, k, d.hd, dq)));
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, true, false, d.t, d.hd, d.t, F32(ds), d.t, q, d.hd, dk)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchMergeQkvGrads(dq, dk, dv, d, F32(dqkv), impl_->round(), s));
    return absl::OkStatus();
  });
}

// -------------------------------------------------------------------- loss

void CudaBackend::SoftmaxCrossEntropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                                      float grad_scale, const Tensor& loss, const Tensor& dlogits) {
  CheckDeviceF32(logits, "logits");
  CheckDeviceF32(loss, "loss");
  CheckDeviceF32(dlogits, "dlogits");
  ENGINE_CHECK(targets.dtype() == DType::kI32 && targets.device() == Device::kCuda, "targets must be i32 on the device");
  const int64_t v = logits.dim(-1), m = v == 0 ? 0 : logits.numel() / v;
  ENGINE_CHECK(targets.numel() == m && dlogits.numel() == logits.numel() && loss.numel() == 1,
               "softmax xent: logits {} targets {}", ShapeString(logits.shape()), ShapeString(targets.shape()));
  impl_->Run([&]() -> absl::Status {
    ASSIGN_OR_RETURN(Tensor scratch, impl_->Scratch(kernels::SoftmaxCrossEntropyScratchFloats(m)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchSoftmaxCrossEntropy(F32(logits), I32(targets), m, v, ignore_index,
                                                            grad_scale, F32(scratch), F32(loss), F32(dlogits),
                                                            impl_->round(), compute_stream()));
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::engine
