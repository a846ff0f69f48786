// CudaBackend: causal self-attention. Three paths, chosen per shape:
//  * 16-bit compute: cuDNN's fused flash attention through its graph API
//    (cudnn_sdpa.h), forward and backward on tensor cores, saving the row
//    logsumexp [b, nh, t] (f32); its plans come from cuDNN's heuristics and
//    are cached per shape.
//  * Where cuDNN has no engine for the shape, or in fp32: our flash kernels
//    (engine/kernels/flash_attention_kernels.cuh; head sizes up to 64),
//    loading 16-bit or f32 storage and computing in fp32 on CUDA cores; they
//    save the same logsumexp, so either backward reads either forward's.
//  * Larger head sizes without cuDNN: heads unpacked into [b * nh, t, hd]
//    buffers, batched cuBLASLt GEMMs around a fused causal softmax, saving the
//    probabilities [b, nh, t, t] (f32, rounded to the compute dtype as the
//    CPU rounds them).

#include <cmath>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/elementwise.h"
#include "engine/kernels/flash_attention.h"
#include "spdlog/spdlog.h"

namespace ringmaster::engine {
namespace {

kernels::AttentionDims CheckAttention(const CudaBackend& be, DType act, const Tensor& qkv, int64_t n_head,
                                      const Tensor& saved) {
  CheckDeviceAct(qkv, act, "qkv");
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

// cuDNN's attention reads and writes 16-byte vectors. The caching allocator's
// blocks are aligned far beyond that; a view at an odd offset goes to the
// flash kernels instead.
bool Aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (PointerAlignment(p) < 16) return false;
  return true;
}

SdpaShape SdpaShapeOf(const kernels::AttentionDims& d, DType act) {
  return SdpaShape{d.b, d.t, d.nh, d.hd, act, AttnScale(d)};
}

// A batched GEMM over the b * nh heads of [b * nh, rows, cols] operands.
GemmCall HeadGemm(const kernels::AttentionDims& d, DType ab, DType c_type, bool trans_a, bool trans_b, int64_t m,
                  int64_t n, int64_t k, const void* a, int64_t a_cols, const void* b, int64_t b_cols, void* c) {
  GemmCall g;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = d.b * d.nh;
  g.ab_type = ab;
  g.c_type = c_type;
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

// Decided once per shape, outside any graph capture (the layer asks for the
// saved shape before its first forward): building a plan allocates. A shape
// cuDNN does not take (UNIMPLEMENTED) falls back quietly; any other failure
// falls back with a warning, once.
bool CudaBackend::CudnnAttention(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const {
  if (!impl_->mixed()) return false;
  const auto key = std::make_tuple(B, n_head, T, head_size);
  auto it = impl_->cudnn_attention.find(key);
  if (it != impl_->cudnn_attention.end()) return it->second;
  const SdpaShape shape = SdpaShapeOf(kernels::AttentionDims{B, T, n_head, head_size}, impl_->act_dtype());
  absl::Status status = impl_->sdpa->ForwardWorkspaceBytes(impl_->cudnn, shape).status();
  if (status.ok()) status = impl_->sdpa->BackwardWorkspaceBytes(impl_->cudnn, shape).status();
  if (!status.ok() && !absl::IsUnimplemented(status)) {
    spdlog::warn("cuDNN attention for B={} H={} T={} head size {} failed ({}): using the flash kernels", B, n_head,
                 T, head_size, status.ToString());
  }
  return impl_->cudnn_attention[key] = status.ok();
}

Shape CudaBackend::AttentionSavedShape(int64_t B, int64_t n_head, int64_t T, int64_t head_size) const {
  if (CudnnAttention(B, n_head, T, head_size) || kernels::FlashAttentionSupports(head_size)) return {B, n_head, T};
  return {B, n_head, T, T};
}

void CudaBackend::AttentionForward(const Tensor& qkv, int64_t n_head, const Tensor& saved, const Tensor& out) {
  const DType act = impl_->act_dtype();
  const kernels::AttentionDims d = CheckAttention(*this, act, qkv, n_head, saved);
  CheckDeviceAct(out, act, "attention out");
  ENGINE_CHECK(out.numel() == d.b * d.t * d.nh * d.hd, "attention out {}", ShapeString(out.shape()));
  if (saved.rank() == 3) {  // the logsumexp: cuDNN, else our flash kernels
    impl_->Run([&]() -> absl::Status {
      if (CudnnAttention(d.b, d.nh, d.t, d.hd) && Aligned16({qkv.raw(), out.raw()})) {
        const SdpaShape shape = SdpaShapeOf(d, act);
        ASSIGN_OR_RETURN(const size_t bytes, impl_->sdpa->ForwardWorkspaceBytes(impl_->cudnn, shape));
        ASSIGN_OR_RETURN(Tensor workspace, impl_->Scratch(static_cast<int64_t>((bytes + 3) / 4)));
        return impl_->sdpa->Forward(impl_->cudnn, shape, qkv.raw(), out.raw(), F32(saved), workspace.raw(),
                                   compute_stream());
      }
      if (!kernels::FlashAttentionSupports(d.hd)) {
        return absl::InvalidArgumentError("cuDNN attention needs 16-byte aligned qkv and out for head size " +
                                          std::to_string(d.hd) + " (the flash kernels take up to 64)");
      }
      CUDA_RETURN_IF_ERROR(kernels::LaunchFlashAttentionForward(qkv.raw(), impl_->act(), d, AttnScale(d), out.raw(),
                                                                F32(saved), compute_stream()));
      return absl::OkStatus();
    });
    return;
  }
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    const int64_t head_elems = d.b * d.nh * d.t * d.hd;
    ASSIGN_OR_RETURN(Tensor heads, impl_->NewTensor({4 * head_elems}, act));  // q, k, v, y
    const Tensor q = heads.Slice1D(0, head_elems), k = heads.Slice1D(head_elems, head_elems);
    const Tensor v = heads.Slice1D(2 * head_elems, head_elems), y = heads.Slice1D(3 * head_elems, head_elems);
    CUDA_RETURN_IF_ERROR(kernels::LaunchSplitHeads(qkv.raw(), impl_->act(), d, 3, q.raw(), k.raw(), v.raw(), s));
    GemmCall scores =
        HeadGemm(d, act, DType::kF32, false, true, d.t, d.t, d.hd, q.raw(), d.hd, k.raw(), d.hd, saved.raw());
    scores.alpha = AttnScale(d);
    RETURN_IF_ERROR(impl_->Gemm(scores));
    CUDA_RETURN_IF_ERROR(kernels::LaunchCausalSoftmax(F32(saved), d, impl_->act(), s));
    Tensor probs = saved;  // the GEMM's operand: f32, or a 16-bit copy (exact: already rounded)
    if (act != DType::kF32) {
      ASSIGN_OR_RETURN(probs, impl_->NewTensor(saved.shape(), act));
      CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(saved.raw(), kernels::FloatType::kF32, probs.raw(), impl_->act(),
                                                  saved.numel(), s));
    }
    RETURN_IF_ERROR(
        impl_->Gemm(HeadGemm(d, act, act, false, false, d.t, d.hd, d.t, probs.raw(), d.t, v.raw(), d.hd, y.raw())));
    CUDA_RETURN_IF_ERROR(kernels::LaunchMergeHeads(y.raw(), impl_->act(), d, out.raw(), s));
    return absl::OkStatus();
  });
}

void CudaBackend::AttentionBackward(const Tensor& qkv, const Tensor& saved, const Tensor& out, const Tensor& dout,
                                    int64_t n_head, const Tensor& dqkv) {
  const DType act = impl_->act_dtype();
  const kernels::AttentionDims d = CheckAttention(*this, act, qkv, n_head, saved);
  CheckDeviceAct(out, act, "attention out");
  CheckDeviceAct(dout, act, "attention dout");
  CheckDeviceAct(dqkv, act, "dqkv");
  ENGINE_CHECK(out.numel() == d.b * d.t * d.nh * d.hd && dout.numel() == out.numel() && dqkv.numel() == qkv.numel(),
               "attention backward shapes");
  if (saved.rank() == 3) {
    impl_->Run([&]() -> absl::Status {
      if (CudnnAttention(d.b, d.nh, d.t, d.hd) && Aligned16({qkv.raw(), out.raw(), dout.raw(), dqkv.raw()})) {
        const SdpaShape shape = SdpaShapeOf(d, act);
        ASSIGN_OR_RETURN(const size_t bytes, impl_->sdpa->BackwardWorkspaceBytes(impl_->cudnn, shape));
        ASSIGN_OR_RETURN(Tensor workspace, impl_->Scratch(static_cast<int64_t>((bytes + 3) / 4)));
        return impl_->sdpa->Backward(impl_->cudnn, shape, qkv.raw(), out.raw(), dout.raw(), F32(saved), dqkv.raw(),
                                    workspace.raw(), compute_stream());
      }
      if (!kernels::FlashAttentionSupports(d.hd)) {
        return absl::InvalidArgumentError("cuDNN attention needs 16-byte aligned qkv, out, dout and dqkv for head "
                                          "size " + std::to_string(d.hd) + " (the flash kernels take up to 64)");
      }
      ASSIGN_OR_RETURN(Tensor dsum, impl_->Scratch(d.b * d.nh * d.t));  // D_i = dout_i . out_i
      CUDA_RETURN_IF_ERROR(kernels::LaunchFlashAttentionBackward(qkv.raw(), out.raw(), F32(saved), dout.raw(),
                                                                 impl_->act(), d, AttnScale(d), F32(dsum),
                                                                 dqkv.raw(), compute_stream()));
      return absl::OkStatus();
    });
    return;
  }
  impl_->Run([&]() -> absl::Status {
    const cudaStream_t s = compute_stream();
    const int64_t head_elems = d.b * d.nh * d.t * d.hd;
    ASSIGN_OR_RETURN(Tensor heads, impl_->NewTensor({7 * head_elems}, act));  // q, k, v, do, dq, dk, dv
    auto part = [&](int i) { return heads.Slice1D(i * head_elems, head_elems).raw(); };
    void *q = part(0), *k = part(1), *v = part(2), *dout_h = part(3), *dq = part(4), *dk = part(5), *dv = part(6);
    ASSIGN_OR_RETURN(Tensor ds, impl_->Scratch(saved.numel()));
    CUDA_RETURN_IF_ERROR(kernels::LaunchSplitHeads(qkv.raw(), impl_->act(), d, 3, q, k, v, s));
    CUDA_RETURN_IF_ERROR(kernels::LaunchSplitHeads(dout.raw(), impl_->act(), d, 1, dout_h, nullptr, nullptr, s));
    // The probabilities and, later, ds as GEMM operands: 16-bit copies (exact:
    // the softmax kernels round them) unless the compute dtype is f32.
    const int64_t att_elems = saved.numel();
    Tensor probs = saved, ds_op = ds;
    if (act != DType::kF32) {
      ASSIGN_OR_RETURN(probs, impl_->NewTensor(saved.shape(), act));
      ASSIGN_OR_RETURN(ds_op, impl_->NewTensor(saved.shape(), act));
      CUDA_RETURN_IF_ERROR(kernels::LaunchConvert(saved.raw(), kernels::FloatType::kF32, probs.raw(), impl_->act(),
                                                  att_elems, s));
    }
    // datt = dout_h @ v^T (f32), then ds in place.
    RETURN_IF_ERROR(
        impl_->Gemm(HeadGemm(d, act, DType::kF32, false, true, d.t, d.t, d.hd, dout_h, d.hd, v, d.hd, ds.raw())));
    // dv = att^T @ dout_h.
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, act, act, true, false, d.t, d.hd, d.t, probs.raw(), d.t, dout_h, d.hd, dv)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchCausalSoftmaxBackward(F32(saved), F32(ds), d, AttnScale(d), impl_->act(), s));
    if (act != DType::kF32) {
      CUDA_RETURN_IF_ERROR(
          kernels::LaunchConvert(ds.raw(), kernels::FloatType::kF32, ds_op.raw(), impl_->act(), att_elems, s));
    }
    // dq = ds @ k; dk = ds^T @ q.
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, act, act, false, false, d.t, d.hd, d.t, ds_op.raw(), d.t, k, d.hd, dq)));
    RETURN_IF_ERROR(impl_->Gemm(HeadGemm(d, act, act, true, false, d.t, d.hd, d.t, ds_op.raw(), d.t, q, d.hd, dk)));
    CUDA_RETURN_IF_ERROR(kernels::LaunchMergeQkvGrads(dq, dk, dv, impl_->act(), d, dqkv.raw(), s));
    return absl::OkStatus();
  });
}

}  // namespace ringmaster::engine
