// CudaBackend: causal self-attention. Head sizes up to 64 run the flash
// kernels (engine/kernels/flash_attention_kernels.cuh), which save only the row
// logsumexp; larger head sizes, which those kernels' register tiles do not
// hold, keep the unfused path: heads unpacked into [b * nh, t, hd] buffers,
// batched cuBLASLt GEMMs around a fused causal softmax, saving the
// probabilities [b, nh, t, t].

#include <cmath>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/flash_attention.h"

namespace ringmaster::engine {
namespace {

kernels::AttentionDims CheckAttention(const CudaBackend& be, const Tensor& qkv, int64_t n_head,
                                      const Tensor& saved) {
  CheckDeviceF32(qkv, "qkv");
  CheckDeviceF32(saved, "attention saved");
  ENGINE_CHECK(qkv.rank() == 3 && qkv.dim(2) % 3 == 0, "qkv must be [B, T, 3C], got {}", ShapeString(qkv.shape()));
  const int64_t c = qkv.dim(2) / 3;
  ENGINE_CHECK(n_head > 0 && c % n_head == 0, "C = {} not divisible by n_head = {}", c, n_head);
  kernels::AttentionDims d{qkv.dim(0), qkv.dim(1), n_head, c / n_head};
  const Shape want = be.AttentionSavedShape(d.b, d.nh, d.t, d.hd);
  ENGINE_CHECK(saved.shape() == want, "attention saved {} for B={} H={} T={} head size {}: want {}",
               ShapeString(saved.shape()), d.b, d.nh, d.t, d.hd, ShapeString(want));
  return d;
}

float AttnScale(const kernels::AttentionDims& d) { return 1.0f / std::sqrt(static_cast<float>(d.hd)); }

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

Shape CudaBackend::AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const {
  if (kernels::FlashAttentionSupports(head_size)) return {B, n_head, T};
  return {B, n_head, T, T};
}

void CudaBackend::AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& saved, const Tensor& out) {
  const kernels::AttentionDims d = CheckAttention(*this, qkv, n_head, saved);
  CheckDeviceF32(out, "attention out");
  ENGINE_CHECK(out.numel() == d.b * d.t * d.nh * d.hd, "attention out {}", ShapeString(out.shape()));
  if (kernels::FlashAttentionSupports(d.hd)) {
    RM_CUDA_OP(kernels::LaunchFlashAttentionForward(F32(qkv), d, AttnScale(d), F32(out), F32(saved), impl_->round(),
                                                    compute_stream()));
    return;
  }
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    const int64_t head_floats = d.b * d.nh * d.t * d.hd;
    ASSIGN_OR_RETURN(Tensor heads, impl_->Scratch(4 * head_floats));  // q, k, v, y
    float* q = F32(heads);
    float* k = q + head_floats;
    float* v = k + head_floats;
    float* y = v + head_floats;
    CUDA_RETURN_IF_ERROR(kernels::LaunchSplitHeads(F32(qkv), d, 3, q, k, v, s));
    GemmCall scores = HeadGemm(d, false, true, d.t, d.t, d.hd, q, d.hd, k, d.hd, F32(saved));
    scores.alpha = AttnScale(d);
    scores.round_output = false;  // the CPU rounds the probabilities, not the scores
    RETURN_IF_ERROR(impl_->Gemm(scores));
    CUDA_RETURN_IF_ERROR(kernels::LaunchCausalSoftmax(F32(saved), d, impl_->round(), s));
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, false, false, d.t, d.hd, d.t, F32(saved), d.t, v, d.hd, y)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchMergeHeads(y, d, F32(out), impl_->round(), s));
    return absl::OkStatus();
  });
}

void CudaBackend::AttentionBackward(const Tensor& qkv, const Tensor& saved, const Tensor& out, const Tensor& dout,
                                    int64_t n_head, const Tensor& dqkv) {
  const kernels::AttentionDims d = CheckAttention(*this, qkv, n_head, saved);
  CheckDeviceF32(out, "attention out");
  CheckDeviceF32(dout, "attention dout");
  CheckDeviceF32(dqkv, "dqkv");
  ENGINE_CHECK(out.numel() == d.b * d.t * d.nh * d.hd && dout.numel() == out.numel() && dqkv.numel() == qkv.numel(),
               "attention backward shapes");
  if (kernels::FlashAttentionSupports(d.hd)) {
    impl_->Run([&]() -> absl::Status {
      ASSIGN_OR_RETURN(Tensor dsum, impl_->Scratch(d.b * d.nh * d.t));  // D_i = dout_i . out_i
      CUDA_RETURN_IF_ERROR(kernels::LaunchFlashAttentionBackward(F32(qkv), F32(out), F32(saved), F32(dout), d,
                                                                 AttnScale(d), F32(dsum), F32(dqkv), impl_->round(),
                                                                 compute_stream()));
      return absl::OkStatus();
    });
    return;
  }
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    const int64_t head_floats = d.b * d.nh * d.t * d.hd;
    ASSIGN_OR_RETURN(Tensor heads, impl_->Scratch(7 * head_floats));  // q, k, v, do, dq, dk, dv
    ASSIGN_OR_RETURN(Tensor ds, impl_->Scratch(saved.numel()));
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
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, true, false, d.t, d.hd, d.t, F32(saved), d.t, dout_h, d.hd, dv)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchCausalSoftmaxBackward(F32(saved), F32(ds), d, AttnScale(d), impl_->round(), s));
    // dq = ds @ k; dk = ds^T @ q.
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, false, false, d.t, d.hd, d.t, F32(ds), d.t, k, d.hd, dq)));
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, true, false, d.t, d.hd, d.t, F32(ds), d.t, q, d.hd, dk)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchMergeQkvGrads(dq, dk, dv, d, F32(dqkv), impl_->round(), s));
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::engine
